#include "conveyor/train/checkpoint.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>

#include "conveyor/comm/comm_error.h"
#include "conveyor/common/atomic_file.h"
#include "conveyor/common/error.h"
#include "conveyor/common/remove_tree.h"
#include "conveyor/formats/checkpoint_files.h"
#include "conveyor/formats/safetensors.h"
#include "conveyor/formats/tensor_slice.h"
#include "conveyor/nn/moe_mlp.h"
#include "conveyor/nn/tensor_parallel.h"
#include "conveyor/train/model_registry.h"

namespace conveyor {
namespace fs = std::filesystem;
using Json = nlohmann::json;
namespace {

// A LoRA run's base model as its manifest names it: the folder's absolute path, "" for
// weights drawn from the seed.
std::string LoraBaseName(const std::string& model_dir) {
  if (model_dir.empty()) return "";
  const fs::path path = fs::absolute(model_dir).lexically_normal();
  return (path.has_filename() ? path : path.parent_path()).string();  // "dir/" as "dir"
}

// The fields a checkpoint must agree on with the run that loads it.
Json ModelJson(const TrainConfig& c) { return ModelSpecJson(c.model); }

// Where a checkpoint keeps an MoE block's selection bias (MoeMlp::selection_bias).
std::string SelectionBiasKey(const MoeMlp& block) {
  return "state/" + block.prefix() + ".selection_bias";
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

// meta.json, the manifest (CheckpointManifest): the run's fields, the loss scale when
// loss scaling is on, and what the rank files hold.
Json Manifest(const fs::path& folder, int64_t step, const TrainConfig& config, int ranks,
              const LossScaler& scaler) {
  Json run = {{"step", step},
              {"model", ModelJson(config)},
              {"seed", config.seed},
              {"data", config.data},
              {"split", config.split},
              {"batch_size", config.batch_size},
              {"dtype", ComputeDtypeName(config.dtype)},
              {"schedule", config.schedule},
              {"pp", config.pp}};
  // A LoRA run's adapters belong to the base folder they were trained on (CheckResume).
  if (config.model.lora_rank > 0) run["lora_base"] = LoraBaseName(config.model.model_dir);
  if (scaler.enabled()) {
    run["loss_scale"] = {{"scale", scaler.scale()}, {"good_steps", scaler.good_steps()}};
  }
  return CheckpointManifest(folder, ranks, run);
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

}  // namespace

std::string SaveCheckpoint(const std::string& dir, Trainer& trainer, const TrainConfig& config,
                           Transport* world) {
  const int64_t step = trainer.step();
  const fs::path final_dir = fs::path(dir) / CheckpointStepName(step);
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
    const PipelineModel& model = trainer.model();
    std::map<std::string, at::Tensor> params;
    for (const auto& [name, p] : model.Parameters()) params.emplace(name, p.detach());
    // With --ep the ranks of an expert-parallel group gather each other's experts (collective).
    params = model.GatherExperts(params);
    const std::map<std::string, at::Tensor> optimizer_state =
        model.GatherExperts(trainer.optimizer().State());
    // The other replicas, and the other CP ranks, hold the same state.
    if (model.coords().dp != 0 || model.coords().cp != 0) return;
    // Whole tensors: the tensor-parallel ranks of replica 0 gather their shards.
    std::map<std::string, at::Tensor> tensors;
    for (const auto& [name, p] : params) {
      tensors.emplace("param/" + name, model.GatherWhole(name, p));
    }
    for (const auto& [key, t] : optimizer_state) {
      tensors.emplace("optim/" + key, model.GatherWhole(key.substr(0, key.rfind('/')), t));
    }
    // Auxiliary-loss-free balancing's selection biases: state that is not a weight.
    for (const MoeMlp* block : model.ExpertBlocks()) {
      if (block->config().bias_rate > 0) {
        tensors.emplace(SelectionBiasKey(*block), block->selection_bias());
      }
    }
    if (!trainer.model().leads_replicas()) return;
    std::map<std::string, std::string> metadata = {
        {"step", std::to_string(step)},
        {"rank", std::to_string(trainer.model().pipeline_rank())},
        {"model", ModelJson(config).dump()}};
    for (const auto& [name, t] : tensors) {
      // A tensor a load would refuse is not saved: the run stops here, naming it.
      const int64_t nonfinite = NonFiniteCount(t);
      CONVEYOR_CHECK(nonfinite == 0)
          << "rank " << trainer.model().rank() << ": at step " << step << ", tensor '" << name
          << "' holds NaN or infinite values (" << nonfinite << " of " << t.numel()
          << "), which no checkpoint keeps";
    }
    WriteCheckpointRankFile((temp / CheckpointRankFile(trainer.model().pipeline_rank())).string(),
                            tensors, metadata);
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
  const fs::path folder = ResolveCheckpointFolder(path);
  const Json meta = ReadCheckpointManifest(folder);
  TrainConfig c;
  try {
    c.model = ModelSpecFromJson(meta["model"], "checkpoint " + path + ": model");
    c.tokenizer = VerifiedCheckpointTokenizer(folder, meta);
    c.seed = meta.value("seed", c.seed);
    c.data = meta.value("data", c.data);
  } catch (const Json::exception& e) {
    CONVEYOR_CHECK(false) << "checkpoint " << path
                          << ": incomplete model description: " << e.what();
  }
  return c;
}

void CheckResume(const TrainConfig& config) {
  const Json meta = ReadCheckpointManifest(ResolveCheckpointFolder(config.resume));
  const int64_t step = meta["step"].get<int64_t>();
  CONVEYOR_CHECK(config.steps > step)
      << "--steps " << config.steps << " is not past the checkpoint's step " << step << " ("
      << config.resume << "): nothing would be trained; give the run's total, more than " << step;
  if (meta.contains("lora_base")) {
    const std::string base = meta["lora_base"].get<std::string>();
    const std::string now = LoraBaseName(config.model.model_dir);
    CONVEYOR_CHECK(base == now) << "--resume " << config.resume
                                << ": its LoRA adapters were trained on the base "
                                << (base.empty() ? "drawn from the seed" : "folder " + base)
                                << ", this run's --model is "
                                << (now.empty() ? "drawn from the seed" : "the folder " + now);
  }
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
  const fs::path folder = ResolveCheckpointFolder(path);
  const Json meta = ReadCheckpointManifest(folder);
  step_ = meta["step"].get<int64_t>();
  lora_base_ = meta.value("lora_base", "");
  files_ = std::make_unique<CheckpointFiles>(folder, meta);
  where_ = "checkpoint " + folder.string();
}

CheckpointWeights::~CheckpointWeights() = default;

bool CheckpointWeights::Holds(const std::string& name) const {
  return files_->tensors().count("param/" + name) > 0;
}

at::Tensor CheckpointWeights::Read(const std::string& name) {
  const std::string stored = "param/" + name;
  CONVEYOR_CHECK(files_->tensors().count(stored)) << where_ << " lacks parameter " << name;
  return ReadTensorSlice(*files_, stored, {}, 1, 0);
}

std::vector<std::string> CheckpointWeights::StateNames() const {
  std::vector<std::string> names;
  for (const auto& [name, stored] : files_->tensors()) {
    if (name.rfind("state/", 0) == 0) names.push_back(name);
  }
  return names;
}

namespace {

// A checkpoint verified against `model` and read for it: this rank's shard of every
// parameter, with `optimizer_state` of its AdamW state too, and the manifest. Changes nothing.
struct LoadedShards {
  fs::path folder;
  Json meta;
  NamedTensors params;                      // the model's
  std::map<std::string, at::Tensor> mine;   // by parameter name
  std::map<MoeMlp*, at::Tensor> biases;     // the selection biases of its MoE blocks
  std::map<std::string, at::Tensor> optim;  // "<name>/exp_avg", "<name>/exp_avg_sq"
};

LoadedShards ReadShards(const std::string& path, const PipelineModel& model,
                        const TrainConfig& config, bool optimizer_state) {
  LoadedShards loaded;
  loaded.folder = ResolveCheckpointFolder(path);
  const fs::path& folder = loaded.folder;
  loaded.meta = ReadCheckpointManifest(folder);
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
  // This rank's tensor-parallel slice of each stored tensor, reading its bytes alone.
  const TensorParallel& tp = model.parallel().tp;
  auto slice = [&](const std::string& name, const std::string& stored) {
    return ReadTensorSlice(files, stored, model.parameter_specs().Of(name), tp.size, tp.rank);
  };
  for (const auto& [name, p] : loaded.params) {
    const std::string stored = "param/" + name;
    CONVEYOR_CHECK(files.tensors().count(stored))
        << "checkpoint " << folder << " lacks parameter " << name;
    const std::vector<int64_t>& whole = files.tensors().at(stored).shape;
    const std::vector<int64_t> part =
        TensorSliceShape(files.tensors().at(stored), model.parameter_specs().Of(name), tp.size,
                         tp.rank, files.Where(stored), stored);
    CONVEYOR_CHECK(at::IntArrayRef(part) == p.sizes())
        << "checkpoint " << folder << ": parameter " << name << " has shape "
        << at::IntArrayRef(whole) << ", this model " << p.sizes()
        << (tp.size > 1 ? " (a tensor-parallel shard)" : "");
    loaded.mine.emplace(name, slice(name, stored));
    if (!optimizer_state) continue;
    for (const char* suffix : {"/exp_avg", "/exp_avg_sq"}) {
      const std::string state = "optim/" + name + suffix;
      if (!files.tensors().count(state)) continue;
      loaded.optim.emplace(name + suffix, slice(name, state));
    }
  }
  for (MoeMlp* block : model.ExpertBlocks()) {
    if (block->config().bias_rate <= 0) continue;
    const std::string key = SelectionBiasKey(*block);
    CONVEYOR_CHECK(files.tensors().count(key))
        << "checkpoint " << folder << " lacks the selection bias of " << block->prefix()
        << ", which --router-bias-rate balances";
    CONVEYOR_CHECK(files.tensors().at(key).shape == std::vector<int64_t>{block->config().experts})
        << "checkpoint " << folder << ": the selection bias of " << block->prefix() << " has shape "
        << at::IntArrayRef(files.tensors().at(key).shape) << ", this model "
        << block->config().experts << " experts";
    loaded.biases.emplace(block, ReadTensorSlice(files, key, {}, 1, 0));
  }
  return loaded;
}

void CopyWeights(const LoadedShards& loaded) {
  at::NoGradGuard no_grad;
  for (const auto& [name, p] : loaded.params) p.copy_(loaded.mine.at(name));
  for (const auto& [block, bias] : loaded.biases) block->RestoreSelectionBias(bias);
}

}  // namespace

void LoadCheckpoint(const std::string& path, Trainer& trainer, const TrainConfig& config) {
  const LoadedShards loaded = ReadShards(path, trainer.model(), config, /*optimizer_state=*/true);
  // Checks the optimizer state and the loss scale before touching anything, then loads.
  NamedTensors trained;  // the optimizer's: a LoRA run's frozen base has no state
  for (const auto& named : loaded.params) {
    if (named.second.requires_grad()) trained.push_back(named);
  }
  AdamW probe(AdamWOptions{});
  probe.LoadState(trained, loaded.optim);
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
  trainer.optimizer().LoadState(trained, loaded.optim);
  CopyWeights(loaded);
  trainer.set_step(loaded.meta["step"].get<int64_t>());
}

void LoadWeights(const std::string& path, PipelineModel& model, const TrainConfig& config) {
  CopyWeights(ReadShards(path, model, config, /*optimizer_state=*/false));
}

}  // namespace conveyor
