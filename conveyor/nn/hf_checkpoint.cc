#include "conveyor/nn/hf_checkpoint.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "conveyor/common/atomic_file.h"
#include "conveyor/common/error.h"
#include "conveyor/nn/hf_config.h"

namespace conveyor {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr char kSingleFile[] = "model.safetensors";
constexpr char kIndexFile[] = "model.safetensors.index.json";

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

}  // namespace

HfCheckpoint::HfCheckpoint(const std::string& dir)
    : dir_(dir), config_(ReadHfLlamaConfig((fs::path(dir) / "config.json").string())) {
  const std::string where = "model folder " + dir + ": ";
  // tensor -> the file that must hold it
  std::map<std::string, std::string> wanted;
  const fs::path index = fs::path(dir) / kIndexFile;
  if (fs::exists(index)) {
    wanted = ReadWeightMap(index.string());
  } else {
    CONVEYOR_CHECK(fs::exists(fs::path(dir) / kSingleFile))
        << where << "has neither " << kSingleFile << " nor " << kIndexFile;
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
    }
  }
  const auto shapes = LlamaParameterShapes(config_);
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
    CONVEYOR_CHECK(shapes.count(tensor))
        << where << fs::path(file->path()).filename().string() << " holds tensor '" << tensor
        << "', which the model config.json describes does not have"
        << (config_.tie_embeddings && tensor == "lm_head.weight" ? " (its embeddings are tied)"
                                                                 : "");
  }
  for (const auto& [tensor, file] : wanted) {
    CONVEYOR_CHECK(file_of_.count(tensor)) << where << kIndexFile << " places tensor '" << tensor
                                           << "' in " << file << ", which does not hold it";
  }
}

at::Tensor HfCheckpoint::Read(const std::string& name) {
  const auto it = file_of_.find(name);
  CONVEYOR_CHECK(it != file_of_.end())
      << "model folder " << dir_ << " has no tensor '" << name << "'";
  ++reads_;
  return it->second->Read(name).to(at::kFloat);
}

at::Tensor HfCheckpoint::ReadShard(const std::string& name, const TensorParallel& tp) {
  const TensorParallelSplit split = TensorParallelSplitOf(name);
  if (split.replicated() || tp.size == 1) return Read(name);
  const auto it = file_of_.find(name);
  CONVEYOR_CHECK(it != file_of_.end())
      << "model folder " << dir_ << " has no tensor '" << name << "'";
  const std::vector<int64_t>& shape = it->second->header().tensors.at(name).shape;
  CONVEYOR_CHECK(split.dim < static_cast<int>(shape.size()) &&
                 shape[split.dim] % (split.blocks * tp.size) == 0)
      << "model folder " << dir_ << ": tensor '" << name << "' of shape " << at::IntArrayRef(shape)
      << " does not split into " << tp.size << " tensor-parallel parts";
  const int64_t block = shape[split.dim] / split.blocks, part = block / tp.size;
  std::vector<at::Tensor> parts;
  for (int b = 0; b < split.blocks; ++b) {
    parts.push_back(it->second->ReadSlice(name, split.dim, b * block + tp.rank * part, part));
  }
  ++reads_;
  return (parts.size() == 1 ? parts[0] : at::cat(parts, split.dim)).to(at::kFloat);
}

void HfCheckpoint::LoadInto(const NamedTensors& params, const TensorParallel& tp) {
  // Every name and shard shape checked from the headers first: nothing changes on a refusal.
  for (const auto& [name, p] : params) {
    const auto it = file_of_.find(name);
    CONVEYOR_CHECK(it != file_of_.end())
        << "model folder " << dir_ << " has no tensor '" << name << "' for this model";
    std::vector<int64_t> shape = it->second->header().tensors.at(name).shape;
    const TensorParallelSplit split = TensorParallelSplitOf(name);
    if (!split.replicated() && tp.size > 1) shape[split.dim] /= tp.size;
    CONVEYOR_CHECK(at::IntArrayRef(shape) == p.sizes())
        << "model folder " << dir_ << ": tensor '" << name << "' gives this rank a part of shape "
        << at::IntArrayRef(shape) << ", its parameter has shape " << p.sizes();
  }
  at::NoGradGuard no_grad;
  for (const auto& [name, p] : params) p.copy_(ReadShard(name, tp));
}

std::vector<std::string> WriteHfCheckpoint(
    const std::string& dir, const LlamaConfig& config, const HfWriteOptions& options,
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
  std::vector<std::vector<std::pair<std::string, std::vector<int64_t>>>> files(1);
  int64_t file_bytes = 0, total_bytes = 0;
  std::set<std::string> placed;  // a tied embedding once
  for (const ParameterShapes& layer : LlamaLayerShapes(config)) {
    for (const auto& [name, shape] : layer) {
      if (!placed.insert(name).second) continue;
      int64_t bytes = element;
      for (int64_t d : shape) bytes *= d;
      if (!files.back().empty() && file_bytes + bytes > options.shard_bytes) {
        files.emplace_back();
        file_bytes = 0;
      }
      files.back().emplace_back(name, shape);
      file_bytes += bytes;
      total_bytes += bytes;
    }
  }
  const fs::path temp = target.string() + ".tmp";
  std::vector<std::string> names;
  try {
    fs::remove_all(temp);
    fs::create_directories(temp);
    const char* torch_dtype = dtype == at::kFloat      ? "float32"
                              : dtype == at::kBFloat16 ? "bfloat16"
                                                       : "float16";
    WriteFileAtomically((temp / "config.json").string(), HfLlamaConfigJson(config, torch_dtype));
    Json weight_map = Json::object();
    for (size_t f = 0; f < files.size(); ++f) {
      char name[64];
      std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", f + 1, files.size());
      names.push_back(files.size() == 1 ? kSingleFile : name);
      std::map<std::string, at::Tensor> tensors;
      for (const auto& [tensor_name, shape] : files[f]) {
        const at::Tensor t = tensor(tensor_name);
        CONVEYOR_ASSERT(t.sizes() == at::IntArrayRef(shape))
            << "tensor '" << tensor_name << "' has shape " << t.sizes() << ", the model "
            << at::IntArrayRef(shape);
        tensors[tensor_name] = t.to(dtype);
        weight_map[tensor_name] = names.back();
      }
      SaveSafetensors((temp / names.back()).string(), tensors, {{"format", "pt"}});
    }
    if (files.size() > 1) {
      const Json index = {{"metadata", {{"total_size", total_bytes}}}, {"weight_map", weight_map}};
      WriteFileAtomically((temp / kIndexFile).string(), index.dump(2) + "\n");
    }
    if (fs::exists(target)) fs::remove(target);  // empty, checked above
    fs::rename(temp, target);
    SyncFolder(fs::absolute(target).parent_path().string());
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(temp, ignored);
    try {
      throw;
    } catch (const fs::filesystem_error& e) {
      CONVEYOR_CHECK(false) << "cannot write " << dir << ": " << e.what();
    }
  }
  return names;
}

}  // namespace conveyor
