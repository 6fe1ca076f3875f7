#include "conveyor/formats/hf_checkpoint.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "conveyor/common/atomic_file.h"
#include "conveyor/common/error.h"
#include "conveyor/common/remove_tree.h"
#include "conveyor/formats/tensor_slice.h"
#include "conveyor/nn/gpt.h"
#include "conveyor/nn/hf_config.h"
#include "conveyor/nn/layer.h"
#include "conveyor/nn/llama.h"

namespace conveyor {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr char kSingleFile[] = "model.safetensors";
constexpr char kIndexFile[] = "model.safetensors.index.json";
// In DIR.tmp while WriteHfCheckpoint writes it: what marks a folder left by a write that
// did not finish as one that may be removed.
constexpr char kUnfinishedMark[] = ".conveyor-unfinished-export";

// tensor -> file, from the index's weight_map.
std::map<std::string, std::string> ReadWeightMap(const std::string& path) {
  std::ifstream in(path);
  CONVEYOR_CHECK(in.good()) << "cannot read " << path;
  Json index;
  try {
    index = Json::parse(in);
  } catch (const Json::exception& e) {
    CONVEYOR_CHECK(false) << path << ": not JSON: " << e.what();
  }
  CONVEYOR_CHECK(index.is_object() && index.contains("weight_map") &&
                 index["weight_map"].is_object())
      << path << ": has no \"weight_map\" object";
  std::map<std::string, std::string> files;
  for (const auto& [tensor, file] : index["weight_map"].items()) {
    CONVEYOR_CHECK(file.is_string() &&
                   fs::path(file.get<std::string>()).filename().string() == file.get<std::string>())
        << path << ": tensor '" << tensor << "' maps to " << file.dump()
        << ", which is not a file name in this folder";
    files[tensor] = file.get<std::string>();
  }
  return files;
}

// GPT-2's attention-mask buffers, which some files hold: not weights.
bool IsGpt2Buffer(const std::string& name) {
  auto ends_with = [&](const std::string& s) {
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  return ends_with(".attn.bias") || ends_with(".attn.masked_bias");
}

// Removes `temp` when it is the temporary folder of a WriteHfCheckpoint that did not finish
// (killed: it holds kUnfinishedMark), saying so on stderr. UserError when something else is
// there, which is left alone.
void RemoveUnfinishedWrite(const fs::path& temp, const std::string& dir) {
  const fs::file_status status = fs::symlink_status(temp);
  if (!fs::exists(status)) return;
  CONVEYOR_CHECK(fs::is_directory(status) &&
                 fs::is_regular_file(fs::symlink_status(temp / kUnfinishedMark)))
      << "cannot write " << dir << ": " << temp.string()
      << " exists and is not a folder left by an unfinished export; move it away or remove it";
  RemoveTree(temp);
  std::fprintf(stderr, "conveyor: removed %s, left by an export to %s that did not finish\n",
               temp.c_str(), dir.c_str());
}

}  // namespace

std::vector<HfTensor> HfTensors(const HfModelConfig& config, const std::string& gpt2_prefix) {
  // The model's layers as shapes alone (on the meta device: no memory), for their
  // parameters' shapes and declared names.
  LayerList layers;
  if (config.gpt2()) {
    GptConfig gpt = config.gpt;
    gpt.weights = WeightInit::kShapesOnly;
    layers = BuildGpt(gpt, /*seed=*/0);
  } else {
    LlamaConfig llama = config.llama;
    llama.weights = WeightInit::kShapesOnly;
    layers = BuildLlama(llama, /*seed=*/0);
  }
  std::vector<HfTensor> tensors;
  std::set<std::string> listed;  // a tied weight once
  for (const std::shared_ptr<Layer>& layer : layers) {
    std::map<std::string, at::Tensor> params;  // a layer's in order of name
    for (const auto& [param, tensor] : layer->NamedParameters()) params.emplace(param, tensor);
    for (const auto& [param, tensor] : params) {
      if (!listed.insert(param).second) continue;
      const HfName& hf = layer->parameter_specs().Of(param).hf;
      HfTensor t{param, hf.name.empty() ? param : hf.name, tensor.sizes().vec(), hf.transposed};
      // GPT2LMHeadModel's weights are in its "transformer." module, but the untied head.
      if (config.gpt2() && t.name != "lm_head.weight") t.name = gpt2_prefix + t.name;
      if (t.transposed) std::swap(t.shape[0], t.shape[1]);
      tensors.push_back(std::move(t));
    }
  }
  return tensors;
}

HfCheckpoint::HfCheckpoint(const std::string& dir)
    : dir_(dir), config_(ReadHfModelConfig((fs::path(dir) / "config.json").string())) {
  const std::string where = "model folder " + dir + ": ";
  // tensor -> the file that must hold it
  std::map<std::string, std::string> wanted;
  const fs::path index = fs::path(dir) / kIndexFile;
  // As transformers' from_pretrained: the single file when there is one, else the index.
  if (!fs::exists(fs::path(dir) / kSingleFile)) {
    CONVEYOR_CHECK(fs::exists(index))
        << where << "has neither " << kSingleFile << " nor " << kIndexFile;
    wanted = ReadWeightMap(index.string());
  }
  std::set<std::string> names;
  for (const auto& [tensor, file] : wanted) names.insert(file);
  if (wanted.empty()) names.insert(kSingleFile);
  for (const std::string& name : names) {
    const fs::path path = fs::path(dir) / name;
    CONVEYOR_CHECK(fs::exists(path))
        << where << kIndexFile << " names " << name << ", which is not in the folder";
    files_.emplace_back(path.string());
  }
  for (SafetensorsReader& file : files_) {
    const std::string name = fs::path(file.path()).filename().string();
    for (const auto& [tensor, entry] : file.header().tensors) {
      CONVEYOR_CHECK(wanted.empty() || (wanted.count(tensor) && wanted.at(tensor) == name))
          << where << name << " holds tensor '" << tensor << "', which " << kIndexFile
          << (wanted.count(tensor) ? " places in " + wanted.at(tensor) : " does not list");
      CONVEYOR_CHECK(file_of_.emplace(tensor, &file).second)
          << where << "tensor '" << tensor << "' is in two files";
      stored_.emplace(tensor, StoredTensor{entry.scalar_type, entry.shape});
    }
  }
  // GPT2LMHeadModel saves "transformer.wte.weight", GPT2Model "wte.weight".
  const bool bare = config_.gpt2() && file_of_.count("wte.weight");
  std::map<std::string, std::vector<int64_t>> shapes;  // by name in the folder
  for (HfTensor& t : HfTensors(config_, bare ? "" : "transformer.")) {
    shapes[t.name] = t.shape;
    tensors_.emplace(t.param, std::move(t));
  }
  for (const auto& [tensor, shape] : shapes) {
    const auto it = file_of_.find(tensor);
    CONVEYOR_CHECK(it != file_of_.end()) << where << "lacks tensor '" << tensor << "'";
    const std::string file = fs::path(it->second->path()).filename().string();
    const SafetensorsEntry& entry = it->second->header().tensors.at(tensor);
    CONVEYOR_CHECK(entry.shape == shape)
        << where << file << ": tensor '" << tensor << "' has shape " << at::IntArrayRef(entry.shape)
        << ", config.json's model needs " << at::IntArrayRef(shape);
    CONVEYOR_CHECK(entry.dtype == "F32" || entry.dtype == "BF16" || entry.dtype == "F16")
        << where << file << ": tensor '" << tensor << "' is stored as " << entry.dtype
        << "; a weight must be F32, BF16 or F16";
  }
  for (const auto& [tensor, file] : file_of_) {
    CONVEYOR_CHECK(shapes.count(tensor) || (config_.gpt2() && IsGpt2Buffer(tensor)))
        << where << fs::path(file->path()).filename().string() << " holds tensor '" << tensor
        << "', which the model config.json describes does not have"
        << (config_.tie_embeddings() && tensor == "lm_head.weight" ? " (its embeddings are tied)"
                                                                   : "");
  }
  for (const auto& [tensor, file] : wanted) {
    CONVEYOR_CHECK(file_of_.count(tensor)) << where << kIndexFile << " places tensor '" << tensor
                                           << "' in " << file << ", which does not hold it";
  }
}

const HfTensor& HfCheckpoint::Find(const std::string& param) const {
  const auto it = tensors_.find(param);
  CONVEYOR_CHECK(it != tensors_.end())
      << "model folder " << dir_ << " has no tensor for parameter '" << param << "'";
  return it->second;
}

std::string HfCheckpoint::Where(const std::string& name) const {
  return "model folder " + dir_ + ": " + fs::path(file_of_.at(name)->path()).filename().string() +
         ": ";
}

void HfCheckpoint::ReadRuns(const std::string& name, const std::vector<ByteRun>& runs, void* out) {
  SafetensorsReader& file = *file_of_.at(name);
  auto* cursor = static_cast<char*>(out);
  for (const ByteRun& run : runs) {
    file.ReadBytes(name, run.begin, run.length, cursor);
    cursor += run.length;
  }
  const at::ScalarType dtype = stored_.at(name).dtype;
  const auto bytes = static_cast<int64_t>(cursor - static_cast<char*>(out));
  CheckFinite(out, bytes / static_cast<int64_t>(c10::elementSize(dtype)), dtype, Where(name), name);
}

ParameterSpec HfCheckpoint::StoredSpec(const HfTensor& t, const ParameterSpec& spec) {
  ParameterSpec stored = spec;
  if (t.transposed && !spec.tp.replicated()) stored.tp.dim = 1 - spec.tp.dim;
  return stored;
}

std::vector<int64_t> HfCheckpoint::ShardShape(const HfTensor& t, const ParameterSpec& spec,
                                              const TensorParallel& tp) const {
  std::vector<int64_t> shape = TensorSliceShape(stored_.at(t.name), StoredSpec(t, spec), tp.size,
                                                tp.rank, "model folder " + dir_ + ": ", t.name);
  if (t.transposed) std::swap(shape[0], shape[1]);  // the parameter's layout
  return shape;
}

void HfCheckpoint::CopyShardInto(const HfTensor& t, const ParameterSpec& spec,
                                 const TensorParallel& tp, const at::Tensor& dst) {
  ++reads_;
  // The stored rows, checked, then widened and transposed in the one copy into dst.
  ReadTensorSliceInto(*this, t.name, StoredSpec(t, spec), tp.size, tp.rank,
                      t.transposed ? dst.t() : dst);
}

at::Tensor HfCheckpoint::Read(const std::string& param) { return ReadShard(param, {}, {}); }

at::Tensor HfCheckpoint::ReadShard(const std::string& param, const ParameterSpec& spec,
                                   const TensorParallel& tp) {
  const HfTensor& t = Find(param);
  at::Tensor shard = at::empty(ShardShape(t, spec, tp), at::kFloat);
  CopyShardInto(t, spec, tp, shard);
  return shard;
}

void HfCheckpoint::LoadInto(const NamedTensors& params, const ParameterSpecs& specs,
                            const TensorParallel& tp) {
  // Every name and shard shape checked from the headers first: nothing changes on a refusal.
  for (const auto& [name, p] : params) {
    const HfTensor& t = Find(name);
    const std::vector<int64_t> shape = ShardShape(t, specs.Of(name), tp);
    CONVEYOR_CHECK(at::IntArrayRef(shape) == p.sizes())
        << "model folder " << dir_ << ": tensor '" << t.name << "' gives this rank a part of shape "
        << at::IntArrayRef(shape) << ", its parameter has shape " << p.sizes();
  }
  // Straight into each parameter: no fp32 copy of a tensor on the way.
  at::NoGradGuard no_grad;
  for (const auto& [name, p] : params) {
    CopyShardInto(Find(name), specs.Of(name), tp, p);
  }
}

std::vector<std::string> WriteHfCheckpoint(
    const std::string& dir, const HfModelConfig& config, const HfWriteOptions& options,
    const std::function<at::Tensor(const std::string&)>& tensor) {
  const at::ScalarType dtype = options.dtype;
  CONVEYOR_CHECK(dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf)
      << "a Hugging Face folder stores weights as fp32, bf16 or fp16, not " << dtype;
  CONVEYOR_CHECK(options.shard_bytes >= 1)
      << "the shard size must be at least 1 byte, got " << options.shard_bytes;
  fs::path target = fs::path(dir).lexically_normal();
  if (target.filename().empty()) target = target.parent_path();  // "out/"
  CONVEYOR_CHECK(!target.empty() &&
                 (!fs::exists(target) || (fs::is_directory(target) && fs::is_empty(target))))
      << dir << " exists and is not an empty folder: nothing is written over it";
  // The files: consecutive tensors in model order while they fit.
  const int64_t element = static_cast<int64_t>(c10::elementSize(dtype));
  std::vector<std::vector<HfTensor>> files(1);
  int64_t file_bytes = 0, total_bytes = 0;
  for (HfTensor& t : HfTensors(config)) {
    int64_t bytes = element;
    for (int64_t d : t.shape) bytes *= d;
    if (!files.back().empty() && file_bytes + bytes > options.shard_bytes) {
      files.emplace_back();
      file_bytes = 0;
    }
    files.back().push_back(std::move(t));
    file_bytes += bytes;
    total_bytes += bytes;
  }
  std::vector<std::string> other_names;
  for (const auto& [name, source] : options.files) other_names.push_back(name);
  for (const auto& [name, text] : options.texts) other_names.push_back(name);
  for (const std::string& name : other_names) {
    CONVEYOR_ASSERT(fs::path(name).filename() == name && name != kUnfinishedMark)
        << "'" << name << "' is not a file name of its own";
  }
  const fs::path temp = target.string() + ".tmp";
  RemoveUnfinishedWrite(temp, dir);
  std::vector<std::string> names;
  try {
    fs::create_directories(temp);
    WriteFileAtomically((temp / kUnfinishedMark).string(), "");
    const char* torch_dtype = dtype == at::kFloat      ? "float32"
                              : dtype == at::kBFloat16 ? "bfloat16"
                                                       : "float16";
    WriteFileAtomically((temp / "config.json").string(), HfModelConfigJson(config, torch_dtype));
    Json weight_map = Json::object();
    for (size_t f = 0; f < files.size(); ++f) {
      char name[64];
      std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", f + 1, files.size());
      names.push_back(files.size() == 1 ? kSingleFile : name);
      std::map<std::string, at::Tensor> tensors;
      for (const HfTensor& hf : files[f]) {
        at::Tensor t = tensor(hf.param);
        if (hf.transposed) t = t.t();
        CONVEYOR_ASSERT(t.sizes() == at::IntArrayRef(hf.shape))
            << "parameter '" << hf.param << "' has shape " << t.sizes() << ", the folder's '"
            << hf.name << "' " << at::IntArrayRef(hf.shape);
        tensors[hf.name] = t.to(dtype).contiguous();
        weight_map[hf.name] = names.back();
      }
      SaveSafetensors((temp / names.back()).string(), tensors, {{"format", "pt"}});
    }
    if (files.size() > 1) {
      const Json index = {{"metadata", {{"total_size", total_bytes}}}, {"weight_map", weight_map}};
      WriteFileAtomically((temp / kIndexFile).string(), index.dump(2) + "\n");
    }
    for (const auto& [name, source] : options.files) fs::copy_file(source, temp / name);
    for (const auto& [name, text] : options.texts)
      WriteFileAtomically((temp / name).string(), text);
    fs::remove(temp / kUnfinishedMark);
    if (fs::exists(target)) fs::remove(target);  // empty, checked above
    fs::rename(temp, target);
    SyncFolder(fs::absolute(target).parent_path().string());
  } catch (...) {
    std::error_code ignored;
    RemoveTree(temp, ignored);
    try {
      throw;
    } catch (const fs::filesystem_error& e) {
      CONVEYOR_CHECK(false) << "cannot write " << dir << ": " << e.what();
    }
  }
  return names;
}

}  // namespace conveyor
