#include "conveyor/train/checkpoint.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>

#include "conveyor/comm/comm_error.h"
#include "conveyor/common/atomic_file.h"
#include "conveyor/common/checksum.h"
#include "conveyor/common/error.h"
#include "conveyor/common/remove_tree.h"
#include "conveyor/nn/safetensors.h"
#include "conveyor/nn/tensor_parallel.h"
#include "conveyor/train/model_registry.h"

namespace conveyor {
namespace fs = std::filesystem;
using Json = nlohmann::json;
namespace {

constexpr char kFormat[] = "conveyor-checkpoint-3";
// Its manifest has no checksum of the tokenizer: read, the tokenizer unverified.
constexpr char kFormatWithoutTokenizerChecksum[] = "conveyor-checkpoint-2";
constexpr char kFormatWithoutChecksums[] = "conveyor-checkpoint-1";
// The one dtype a checkpoint stores: the fp32 master weights and AdamW state.
constexpr char kStoredDtype[] = "F32";
// A rank file's metadata holds "fnv1a64/<tensor>" -> the tensor's checksum, in hex.
constexpr char kChecksumPrefix[] = "fnv1a64/";

// The fields a checkpoint must agree on with the run that loads it.
Json ModelJson(const TrainConfig& c) { return ModelSpecJson(c.model); }

std::string StepName(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%06lld", static_cast<long long>(step));
  return name;
}

std::string RankFile(int rank) { return "rank-" + std::to_string(rank) + ".safetensors"; }

// The checksum of a tensor's bytes as safetensors stores them (CPU, row-major).
std::string TensorChecksum(const at::Tensor& t) {
  const at::Tensor bytes = t.detach().to(at::kCPU).contiguous();
  return Hex64(Fnv1a64(bytes.data_ptr(), bytes.nbytes()));
}

// The checksum of the file at `path`, read whole (a tokenizer: megabytes at most).
std::string FileChecksum(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CONVEYOR_CHECK(in.good() || in.eof()) << "cannot read " << path.string();
  return Hex64(Fnv1a64(bytes.data(), bytes.size()));
}

void RemoveQuietly(const fs::path& path) {
  std::error_code ignored;
  RemoveTree(path, ignored);
}

// The ranks that pass `failed`, the same list on every rank. Collective.
std::vector<int> FailedRanks(Transport* world, bool failed) {
  if (world == nullptr) return failed ? std::vector<int>{0} : std::vector<int>{};
  const std::vector<at::Tensor> flags = world->AllGather(at::full({}, failed ? 1 : 0, at::kInt));
  std::vector<int> failed_ranks;
  for (int r = 0; r < world->world_size(); ++r) {
    if (flags[r].item<int>() != 0) failed_ranks.push_back(r);
  }
  return failed_ranks;
}

// meta.json, the manifest: the step, the model, every rank's file with each tensor's dtype,
// shape and checksum as that file's header records them, and the tokenizer's checksum when
// the folder has one.
Json Manifest(const fs::path& folder, int64_t step, const TrainConfig& config, int ranks,
              const LossScaler& scaler) {
  Json files = Json::object();
  for (int r = 0; r < ranks; ++r) {
    const std::string name = RankFile(r);
    const SafetensorsHeader header = LoadSafetensorsHeader((folder / name).string());
    Json tensors = Json::object();
    for (const auto& [tensor, entry] : header.tensors) {
      const auto checksum = header.metadata.find(kChecksumPrefix + tensor);
      CONVEYOR_ASSERT(checksum != header.metadata.end())
          << name << " lacks a checksum of " << tensor;
      tensors[tensor] = {
          {"dtype", entry.dtype}, {"shape", entry.shape}, {"fnv1a64", checksum->second}};
    }
    files[name] = {{"tensors", tensors}};
  }
  Json manifest = {{"format", kFormat},
                   {"step", step},
                   {"model", ModelJson(config)},
                   {"seed", config.seed},
                   {"data", config.data},
                   {"split", config.split},
                   {"batch_size", config.batch_size},
                   {"dtype", ComputeDtypeName(config.dtype)},
                   {"schedule", config.schedule},
                   {"pp", config.pp},
                   {"files", files}};
  if (scaler.enabled()) {
    manifest["loss_scale"] = {{"scale", scaler.scale()}, {"good_steps", scaler.good_steps()}};
  }
  if (fs::exists(folder / kTokenizerFile)) {
    manifest["tokenizer"] = {{"fnv1a64", FileChecksum(folder / kTokenizerFile)}};
  }
  return manifest;
}

// Moves the finished `temp` folder to `final_dir` and points DIR/latest at it, each step
// durable. A checkpoint of the same step saved before is replaced.
void Publish(const fs::path& dir, const fs::path& temp, const fs::path& final_dir) {
  const fs::path old = final_dir.string() + ".old";
  RemoveTree(old);
  const bool replacing = fs::exists(final_dir);
  if (replacing) fs::rename(final_dir, old);
  try {
    fs::rename(temp, final_dir);
  } catch (const fs::filesystem_error&) {
    std::error_code ignored;
    if (replacing) fs::rename(old, final_dir, ignored);
    throw;
  }
  SyncFolder(dir.string());
  WriteFileAtomically((dir / "latest").string(), final_dir.filename().string() + "\n");
  RemoveTree(old);
}

fs::path ResolveStepFolder(const std::string& path) {
  fs::path given(path);
  if (!given.has_filename()) given = given.parent_path();  // "DIR/step-000004/"
  if (fs::exists(given / "meta.json")) return given;
  const fs::path latest = given / "latest";
  CONVEYOR_CHECK(fs::exists(latest))
      << "'" << path << "' is not a checkpoint: it has neither meta.json nor latest";
  std::ifstream in(latest);
  std::string name;
  std::getline(in, name);
  CONVEYOR_CHECK(!name.empty() && fs::exists(given / name / "meta.json"))
      << "'" << latest.string() << "' names '" << name << "', which is not a checkpoint";
  return given / name;
}

// meta.json of `folder`, checked for what every use needs: the format, the step (agreeing
// with a folder named after a step), the model and the list of files.
Json ReadMeta(const fs::path& folder) {
  const std::string where = "checkpoint " + folder.string() + ": ";
  Json meta;
  try {
    std::ifstream in(folder / "meta.json");
    meta = Json::parse(in);
    CONVEYOR_CHECK(meta.is_object()) << where << "meta.json is not a JSON object";
    const std::string format = meta.value("format", "");
    CONVEYOR_CHECK(format != kFormatWithoutChecksums)
        << where << "written by an older conveyor (format " << kFormatWithoutChecksums
        << "), before checkpoints had checksums; it cannot be verified and is refused";
    CONVEYOR_CHECK(format == kFormat || format == kFormatWithoutTokenizerChecksum)
        << where << "not a conveyor checkpoint (meta.json has format '" << format << "', expected '"
        << kFormat << "' or the older '" << kFormatWithoutTokenizerChecksum << "')";
    CONVEYOR_CHECK(meta.contains("step") && meta["step"].is_number_integer() &&
                   meta["step"].get<int64_t>() >= 0)
        << where << "meta.json has no valid step";
    CONVEYOR_CHECK(meta.contains("model") && meta["model"].is_object())
        << where << "meta.json has no model description";
    CONVEYOR_CHECK(meta.contains("files") && meta["files"].is_object() && !meta["files"].empty())
        << where << "meta.json lists no files";
  } catch (const Json::exception& e) {
    CONVEYOR_CHECK(false) << where << "meta.json is corrupt: " << e.what();
  }
  const int64_t step = meta["step"].get<int64_t>();
  const std::string name = folder.filename().string();
  CONVEYOR_CHECK(name.rfind("step-", 0) != 0 || name == StepName(step))
      << where << "meta.json says step " << step << ", but the folder is " << name;
  return meta;
}

// A rank file's own record of its step and model against the manifest's.
void CheckFileOrigin(const std::map<std::string, std::string>& metadata, const Json& meta,
                     const std::string& where) {
  const int64_t step = meta["step"].get<int64_t>();
  const auto written = metadata.find("step");
  CONVEYOR_CHECK(written != metadata.end() && written->second == std::to_string(step))
      << where << "written at step " << (written == metadata.end() ? "?" : written->second)
      << ", meta.json says step " << step << " (a file from another checkpoint?)";
  const auto model_text = metadata.find("model");
  const Json model = Json::parse(model_text == metadata.end() ? "" : model_text->second, nullptr,
                                 /*allow_exceptions=*/false);
  CONVEYOR_CHECK(model.is_object()) << where << "does not say which model it was written for";
  for (const auto& [key, value] : meta["model"].items()) {
    CONVEYOR_CHECK(model.contains(key) && model[key] == value)
        << where << "written for a model with " << key << " = "
        << (model.contains(key) ? model[key].dump() : "nothing") << ", but meta.json says "
        << value.dump();
  }
  CONVEYOR_CHECK(model == meta["model"]) << where << "written for the model " << model.dump()
                                         << ", but meta.json says " << meta["model"].dump();
}

// The path of the tokenizer saved in `folder`, "" when it has none, checked against the
// manifest: listed if and only if present, its bytes giving the listed checksum. A checkpoint
// of the format before tokenizer checksums has its tokenizer returned unverified.
std::string VerifiedTokenizer(const fs::path& folder, const Json& meta) {
  const fs::path path = folder / kTokenizerFile;
  const std::string where = "checkpoint " + folder.string() + ": " + kTokenizerFile + " ";
  const bool present = fs::exists(path);
  if (meta.value("format", "") == kFormatWithoutTokenizerChecksum) {
    return present ? path.string() : "";
  }
  if (!meta.contains("tokenizer")) {
    CONVEYOR_CHECK(!present) << where << "is not listed in meta.json (a file from elsewhere?)";
    return "";
  }
  const Json& listed = meta["tokenizer"];
  CONVEYOR_CHECK(listed.is_object() && listed.contains("fnv1a64") && listed["fnv1a64"].is_string())
      << "checkpoint " << folder.string()
      << ": meta.json's tokenizer is not {fnv1a64}: " << listed.dump();
  CONVEYOR_CHECK(fs::is_regular_file(path)) << where << "is missing (meta.json lists it)";
  const std::string checksum = FileChecksum(path);
  CONVEYOR_CHECK(checksum == listed["fnv1a64"].get<std::string>())
      << where << "fails its checksum (its bytes give " << checksum << ", meta.json says "
      << listed["fnv1a64"].get<std::string>() << "): the file was replaced or is corrupt";
  return path.string();
}

}  // namespace

// The rank files of the checkpoint in `folder`, opened and checked against the manifest
// before any data is read (listed, its step, its model, its tensors' names, dtypes and
// shapes, every dtype F32); Read then reads one tensor alone and checks its data (finite,
// checksum). Every reader of a checkpoint's tensors (resume, generate, eval, export) reads
// through here. A rank reads the tensors of its own stages and no others. Throws UserError
// naming the file and the tensor.
class CheckpointFiles {
 public:
  CheckpointFiles(const fs::path& folder, const Json& meta) {
    const std::string where = "checkpoint " + folder.string() + ": ";
    const Json& files = meta["files"];
    for (const auto& entry : fs::directory_iterator(folder)) {
      const std::string name = entry.path().filename().string();
      CONVEYOR_CHECK(entry.path().extension() != ".safetensors" || files.contains(name))
          << where << name << " is not listed in meta.json (a file from another checkpoint?)";
    }
    try {
      for (const auto& [name, listed] : files.items()) {
        const std::string file = where + name + ": ";
        CONVEYOR_CHECK(fs::path(name).filename() == name &&
                       fs::path(name).extension() == ".safetensors")
            << where << "meta.json lists '" << name << "', which is not a rank file's name";
        const std::string path = (folder / name).string();
        CONVEYOR_CHECK(fs::exists(path)) << file << "missing (meta.json lists it)";
        auto reader = std::make_unique<SafetensorsReader>(path);
        const SafetensorsHeader& header = reader->header();
        CheckFileOrigin(header.metadata, meta, file);
        const Json& tensors = listed.at("tensors");
        for (const auto& [tensor, entry] : header.tensors) {
          CONVEYOR_CHECK(tensors.contains(tensor))
              << file << "tensor '" << tensor << "' is not listed in meta.json";
        }
        for (const auto& [tensor, want] : tensors.items()) {
          const auto found = header.tensors.find(tensor);
          CONVEYOR_CHECK(found != header.tensors.end())
              << file << "lacks tensor '" << tensor << "' (meta.json lists it)";
          const std::string dtype = want.at("dtype");
          CONVEYOR_CHECK(found->second.dtype == dtype)
              << file << "tensor '" << tensor << "' has dtype " << found->second.dtype
              << ", meta.json says " << dtype;
          CONVEYOR_CHECK(Json(found->second.shape) == want.at("shape"))
              << file << "tensor '" << tensor << "' has shape " << Json(found->second.shape).dump()
              << ", meta.json says " << want.at("shape").dump();
          CONVEYOR_CHECK(dtype == kStoredDtype)
              << file << "tensor '" << tensor << "' is stored as " << dtype
              << "; a checkpoint stores every weight and optimizer state as " << kStoredDtype;
          // A tensor in several files (a tied embedding): the first file's copy.
          located_.emplace(tensor, Located{reader.get(), file, want.at("fnv1a64")});
        }
        readers_.push_back(std::move(reader));
      }
    } catch (const Json::exception& e) {
      CONVEYOR_CHECK(false) << where << "meta.json is corrupt: " << e.what();
    }
  }

  bool Has(const std::string& tensor) const { return located_.count(tensor) > 0; }

  // Precondition: Has(tensor).
  at::Tensor Read(const std::string& tensor) {
    const Located& at = located_.at(tensor);
    at::Tensor t = at.reader->Read(tensor);
    const int64_t nonfinite = NonFiniteCount(t);
    CONVEYOR_CHECK(nonfinite == 0)
        << at.file << "tensor '" << tensor << "' holds NaN or infinite values (" << nonfinite
        << " of " << t.numel() << ")";
    const std::string checksum = TensorChecksum(t);
    CONVEYOR_CHECK(checksum == at.checksum)
        << at.file << "tensor '" << tensor << "' fails its checksum (its bytes give " << checksum
        << ", meta.json says " << at.checksum << "): the file is corrupt";
    return t;
  }

 private:
  struct Located {
    SafetensorsReader* reader;
    std::string file;  // "checkpoint DIR: rank-R.safetensors: ", for messages
    std::string checksum;
  };
  std::vector<std::unique_ptr<SafetensorsReader>> readers_;
  std::map<std::string, Located> located_;
};

std::string SaveCheckpoint(const std::string& dir, Trainer& trainer, const TrainConfig& config,
                           Transport* world) {
  const int64_t step = trainer.step();
  const fs::path final_dir = fs::path(dir) / StepName(step);
  const fs::path temp = final_dir.string() + ".tmp";
  const bool leader = trainer.model().rank() == 0;
  std::string error;  // this rank's failure
  // Runs `work`, then every rank learns whether any rank failed; if one did, rank 0 removes
  // the temporary folder and every rank throws.
  auto phase = [&](const std::function<void()>& work) {
    try {
      work();
    } catch (const std::exception& e) {
      error = e.what();
    }
    std::vector<int> failed;
    try {
      failed = FailedRanks(world, !error.empty());
    } catch (...) {
      if (leader) RemoveQuietly(temp);
      throw;
    }
    if (failed.empty()) return;
    if (leader) RemoveQuietly(temp);
    const std::string kept = "; the previous checkpoint, if any, is still the latest";
    CONVEYOR_CHECK(error.empty()) << "checkpoint " << final_dir.string() << " was not written ("
                                  << error << ")" << kept;
    // Not this rank's failure: the launcher blames the rank that failed.
    std::string ranks;
    for (int r : failed) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    throw CommError("rank " + std::to_string(trainer.model().rank()) + ": checkpoint " +
                        final_dir.string() + " was not written (rank " + ranks +
                        " failed to write its part)" + kept,
                    /*caused_by_peer=*/true);
  };

  phase([&] {
    if (!leader) return;
    fs::create_directories(dir);
    RemoveTree(temp);
    fs::create_directory(temp);
  });
  phase([&] {
    // On every rank: with --zero 1 the replicas gather their shards of it (collective).
    const std::map<std::string, at::Tensor> optimizer_state = trainer.optimizer().State();
    if (trainer.model().coords().dp != 0) return;  // the other replicas hold the same state
    // Whole tensors: the tensor-parallel ranks of replica 0 gather their shards.
    const PipelineModel& model = trainer.model();
    std::map<std::string, at::Tensor> tensors;
    for (const auto& [name, p] : model.Parameters()) {
      tensors.emplace("param/" + name, model.GatherWhole(name, p.detach()));
    }
    for (const auto& [key, t] : optimizer_state) {
      tensors.emplace("optim/" + key, model.GatherWhole(key.substr(0, key.rfind('/')), t));
    }
    if (!trainer.model().leads_replicas()) return;
    std::map<std::string, std::string> metadata = {
        {"step", std::to_string(step)},
        {"rank", std::to_string(trainer.model().pipeline_rank())},
        {"model", ModelJson(config).dump()}};
    for (const auto& [name, t] : tensors) {
      CONVEYOR_ASSERT(t.scalar_type() == at::kFloat)
          << name << " is " << t.scalar_type() << ", not the fp32 a checkpoint stores";
      // A tensor a load would refuse is not saved: the run stops here, naming it.
      const int64_t nonfinite = NonFiniteCount(t);
      CONVEYOR_CHECK(nonfinite == 0)
          << "rank " << trainer.model().rank() << ": at step " << step << ", tensor '" << name
          << "' holds NaN or infinite values (" << nonfinite << " of " << t.numel()
          << "), which no checkpoint keeps";
      metadata[kChecksumPrefix + name] = TensorChecksum(t);
    }
    SaveSafetensors((temp / RankFile(trainer.model().pipeline_rank())).string(), tensors, metadata);
  });
  // Every rank's file is durable (each was fsynced with its folder): the manifest, then
  // the final name, then latest.
  phase([&] {
    if (!leader) return;
    // The tokenizer travels with the weights: generate, eval and export find it here.
    if (!config.tokenizer.empty() && config.tokenizer != "bytes") {
      fs::copy_file(config.tokenizer, temp / kTokenizerFile, fs::copy_options::overwrite_existing);
    }
    WriteFileAtomically(
        (temp / "meta.json").string(),
        Manifest(temp, step, config, trainer.model().mesh().pp(), trainer.loss_scaler()).dump(2) +
            "\n");
    Publish(dir, temp, final_dir);
  });
  return final_dir.string();
}

TrainConfig CheckpointConfig(const std::string& path) {
  const fs::path folder = ResolveStepFolder(path);
  const Json meta = ReadMeta(folder);
  TrainConfig c;
  try {
    c.model = ModelSpecFromJson(meta["model"], "checkpoint " + path + ": model");
    c.tokenizer = VerifiedTokenizer(folder, meta);
    c.seed = meta.value("seed", c.seed);
    c.data = meta.value("data", c.data);
  } catch (const Json::exception& e) {
    CONVEYOR_CHECK(false) << "checkpoint " << path
                          << ": incomplete model description: " << e.what();
  }
  return c;
}

void CheckResume(const TrainConfig& config) {
  const Json meta = ReadMeta(ResolveStepFolder(config.resume));
  const int64_t step = meta["step"].get<int64_t>();
  CONVEYOR_CHECK(config.steps > step)
      << "--steps " << config.steps << " is not past the checkpoint's step " << step << " ("
      << config.resume << "): nothing would be trained; give the run's total, more than " << step;
  if (config.resume_with_changes) return;
  std::string changed;
  auto compare = [&](const char* key, const std::string& flag, const Json& now) {
    if (!meta.contains(key) || meta[key] == now) return;
    changed += (changed.empty() ? "" : ", ") + flag + " " +
               (now.is_string() ? now.get<std::string>() : now.dump()) +
               " (the checkpoint's run: " +
               (meta[key].is_string() ? meta[key].get<std::string>() : meta[key].dump()) + ")";
  };
  compare("seed", "--seed", config.seed);
  compare("batch_size", "--batch-size", config.batch_size);
  compare("dtype", "--dtype", std::string(ComputeDtypeName(config.dtype)));
  compare("data", "--data", config.data);
  compare("split", "--split", config.split);
  CONVEYOR_CHECK(changed.empty())
      << "--resume " << config.resume
      << " with other settings than the run that saved it: " << changed
      << "; the rest of the run would see other samples or compute otherwise. "
      << "Give the same ones, or --resume-with-changes if this is meant";
}

CheckpointWeights::CheckpointWeights(const std::string& path) : config_(CheckpointConfig(path)) {
  const fs::path folder = ResolveStepFolder(path);
  const Json meta = ReadMeta(folder);
  step_ = meta["step"].get<int64_t>();
  files_ = std::make_unique<CheckpointFiles>(folder, meta);
  where_ = "checkpoint " + folder.string();
}

CheckpointWeights::~CheckpointWeights() = default;

at::Tensor CheckpointWeights::Read(const std::string& name) {
  CONVEYOR_CHECK(files_->Has("param/" + name)) << where_ << " lacks parameter " << name;
  return files_->Read("param/" + name);
}

namespace {

// A checkpoint verified against `model` and read for it: this rank's shard of every
// parameter, with `optimizer_state` of its AdamW state too, and the manifest. Changes nothing.
struct LoadedShards {
  fs::path folder;
  Json meta;
  NamedTensors params;                      // the model's
  std::map<std::string, at::Tensor> mine;   // by parameter name
  std::map<std::string, at::Tensor> optim;  // "<name>/exp_avg", "<name>/exp_avg_sq"
};

LoadedShards ReadShards(const std::string& path, const PipelineModel& model,
                        const TrainConfig& config, bool optimizer_state) {
  LoadedShards loaded;
  loaded.folder = ResolveStepFolder(path);
  const fs::path& folder = loaded.folder;
  loaded.meta = ReadMeta(folder);
  const Json& meta = loaded.meta;
  // Every rank file, whatever the partition that wrote them; only this rank's tensors read.
  CheckpointFiles files(folder, meta);
  const Json want = ModelJson(config);
  for (const auto& [key, value] : want.items()) {
    CONVEYOR_CHECK(meta["model"].contains(key) && meta["model"][key] == value)
        << "checkpoint " << folder << " was saved with " << key << " = "
        << (meta["model"].contains(key) ? meta["model"][key].dump() : "nothing")
        << ", this run has " << value.dump();
  }
  loaded.params = model.Parameters();
  // This rank's tensor-parallel shard of each whole tensor.
  const TensorParallel& tp = model.tensor_parallel();
  auto shard = [&](const std::string& name, const at::Tensor& whole) {
    // A copy: a view would keep the whole tensor alive.
    return TakeShard(whole, model.parameter_specs().Of(name).tp, tp.size, tp.rank)
        .clone(at::MemoryFormat::Contiguous);
  };
  for (const auto& [name, p] : loaded.params) {
    const std::string stored = "param/" + name;
    CONVEYOR_CHECK(files.Has(stored)) << "checkpoint " << folder << " lacks parameter " << name;
    const at::Tensor whole = files.Read(stored);
    const at::Tensor part = shard(name, whole);
    CONVEYOR_CHECK(part.sizes() == p.sizes())
        << "checkpoint " << folder << ": parameter " << name << " has shape " << whole.sizes()
        << ", this model " << p.sizes() << (tp.size > 1 ? " (a tensor-parallel shard)" : "");
    loaded.mine.emplace(name, part);
    if (!optimizer_state) continue;
    for (const char* suffix : {"/exp_avg", "/exp_avg_sq"}) {
      const std::string state = "optim/" + name + suffix;
      if (!files.Has(state)) continue;
      loaded.optim.emplace(name + suffix, shard(name, files.Read(state)));
    }
  }
  return loaded;
}

void CopyWeights(const LoadedShards& loaded) {
  at::NoGradGuard no_grad;
  for (const auto& [name, p] : loaded.params) p.copy_(loaded.mine.at(name));
}

}  // namespace

void LoadCheckpoint(const std::string& path, Trainer& trainer, const TrainConfig& config) {
  const LoadedShards loaded = ReadShards(path, trainer.model(), config, /*optimizer_state=*/true);
  // Checks the optimizer state and the loss scale before touching anything, then loads.
  AdamW probe(AdamWOptions{});
  probe.LoadState(loaded.params, loaded.optim);
  LossScaler scaler = trainer.loss_scaler();
  if (scaler.enabled() && loaded.meta.contains("loss_scale")) {
    const Json& ls = loaded.meta["loss_scale"];
    CONVEYOR_CHECK(ls.is_object() && ls.contains("scale") && ls["scale"].is_number() &&
                   ls.contains("good_steps") && ls["good_steps"].is_number_integer())
        << "checkpoint " << loaded.folder
        << ": meta.json's loss_scale is not {scale, good_steps}: " << ls.dump();
    scaler.Restore(ls["scale"].get<double>(), ls["good_steps"].get<int64_t>());
  }
  trainer.loss_scaler() = scaler;
  trainer.optimizer().LoadState(loaded.params, loaded.optim);
  CopyWeights(loaded);
  trainer.set_step(loaded.meta["step"].get<int64_t>());
}

void LoadWeights(const std::string& path, PipelineModel& model, const TrainConfig& config) {
  CopyWeights(ReadShards(path, model, config, /*optimizer_state=*/false));
}

}  // namespace conveyor
