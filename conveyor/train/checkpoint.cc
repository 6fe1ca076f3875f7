#include "conveyor/train/checkpoint.h"

#include <ATen/ATen.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "conveyor/common/error.h"
#include "conveyor/nn/safetensors.h"

namespace conveyor {
namespace fs = std::filesystem;
namespace {

// The fields a checkpoint must agree on with the run that loads it.
nlohmann::json ModelJson(const TrainConfig& c) {
  return {{"model", c.model},    {"layers", c.layers},   {"hidden", c.hidden},
          {"heads", c.heads},    {"seq_len", c.seq_len}, {"tie_embeddings", c.tie_embeddings},
          {"classes", c.classes}};
}

std::string StepName(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%06lld", static_cast<long long>(step));
  return name;
}

void WriteFileAtomically(const fs::path& path, const std::string& text) {
  const fs::path temp = path.string() + ".tmp";
  {
    std::ofstream out(temp);
    out << text;
    CONVEYOR_CHECK(out.good()) << "cannot write " << temp;
  }
  fs::rename(temp, path);
}

void Barrier(Transport* world) {
  if (world != nullptr) world->Barrier();
}

fs::path ResolveStepFolder(const std::string& path) {
  const fs::path given(path);
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

}  // namespace

std::string SaveCheckpoint(const std::string& dir, Trainer& trainer, const TrainConfig& config,
                           Transport* world) {
  const fs::path final_dir = fs::path(dir) / StepName(trainer.step());
  const fs::path temp_dir = final_dir.string() + ".tmp";
  if (trainer.rank() == 0) {
    fs::create_directories(dir);
    fs::remove_all(temp_dir);
    fs::create_directories(temp_dir);
  }
  Barrier(world);
  std::map<std::string, at::Tensor> tensors;
  for (const auto& [name, p] : trainer.Parameters()) tensors.emplace("param/" + name, p.detach());
  for (const auto& [key, t] : trainer.optimizer().State()) tensors.emplace("optim/" + key, t);
  nn::SaveSafetensors(
      (temp_dir / ("rank-" + std::to_string(trainer.rank()) + ".safetensors")).string(), tensors,
      {{"step", std::to_string(trainer.step())}});
  Barrier(world);
  if (trainer.rank() == 0) {
    const nlohmann::json meta = {{"format", "conveyor-checkpoint-1"},
                                 {"step", trainer.step()},
                                 {"model", ModelJson(config)},
                                 {"seed", config.seed},
                                 {"data", config.data},
                                 {"schedule", config.schedule},
                                 {"pp", config.pp}};
    WriteFileAtomically(temp_dir / "meta.json", meta.dump(2) + "\n");
    fs::remove_all(final_dir);
    fs::rename(temp_dir, final_dir);
    WriteFileAtomically(fs::path(dir) / "latest", final_dir.filename().string() + "\n");
  }
  Barrier(world);
  return final_dir.string();
}

namespace {

nlohmann::json ReadMeta(const fs::path& folder) {
  nlohmann::json meta;
  try {
    std::ifstream in(folder / "meta.json");
    meta = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    CONVEYOR_CHECK(false) << "checkpoint " << folder << ": meta.json is corrupt: " << e.what();
  }
  CONVEYOR_CHECK(meta.value("format", "") == "conveyor-checkpoint-1" && meta.contains("step") &&
                 meta.contains("model") && meta["model"].is_object())
      << "checkpoint " << folder << ": not a conveyor checkpoint";
  return meta;
}

}  // namespace

TrainConfig CheckpointConfig(const std::string& path) {
  const nlohmann::json meta = ReadMeta(ResolveStepFolder(path));
  TrainConfig c;
  try {
    const nlohmann::json& m = meta["model"];
    c.model = m.at("model");
    c.layers = m.at("layers");
    c.hidden = m.at("hidden");
    c.heads = m.at("heads");
    c.seq_len = m.at("seq_len");
    c.tie_embeddings = m.at("tie_embeddings");
    c.classes = m.at("classes");
    c.seed = meta.value("seed", c.seed);
    c.data = meta.value("data", c.data);
  } catch (const nlohmann::json::exception& e) {
    CONVEYOR_CHECK(false) << "checkpoint " << path
                          << ": incomplete model description: " << e.what();
  }
  return c;
}

void LoadCheckpoint(const std::string& path, Trainer& trainer, const TrainConfig& config) {
  const fs::path folder = ResolveStepFolder(path);
  const nlohmann::json meta = ReadMeta(folder);
  const nlohmann::json want = ModelJson(config);
  for (const auto& [key, value] : want.items()) {
    CONVEYOR_CHECK(meta["model"].contains(key) && meta["model"][key] == value)
        << "checkpoint " << folder << " was saved with " << key << " = "
        << (meta["model"].contains(key) ? meta["model"][key].dump() : "nothing")
        << ", this run has " << value.dump();
  }
  // Every rank file, whatever the partition that wrote them.
  std::map<std::string, at::Tensor> all;
  for (const auto& entry : fs::directory_iterator(folder)) {
    if (entry.path().extension() != ".safetensors") continue;
    for (auto& [name, t] : nn::LoadSafetensors(entry.path().string()).tensors) all.emplace(name, t);
  }
  const NamedTensors params = trainer.Parameters();
  std::map<std::string, at::Tensor> optim;
  for (const auto& [name, p] : params) {
    auto it = all.find("param/" + name);
    CONVEYOR_CHECK(it != all.end()) << "checkpoint " << folder << " lacks parameter " << name;
    CONVEYOR_CHECK(it->second.sizes() == p.sizes())
        << "checkpoint " << folder << ": parameter " << name << " has shape " << it->second.sizes()
        << ", this model " << p.sizes();
    for (const char* suffix : {"/exp_avg", "/exp_avg_sq"}) {
      auto state = all.find("optim/" + name + suffix);
      if (state != all.end()) optim.emplace(name + suffix, state->second);
    }
  }
  // Checks the optimizer state before touching anything, then loads.
  AdamW probe(AdamWOptions{});
  probe.LoadState(params, optim);
  trainer.optimizer().LoadState(params, optim);
  at::NoGradGuard no_grad;
  for (const auto& [name, p] : params) p.copy_(all.at("param/" + name));
  trainer.set_step(meta["step"].get<int64_t>());
}

}  // namespace conveyor
