#include "conveyor/train/train_config.h"

#include <toml++/toml.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <type_traits>
#include <utility>

#include "conveyor/common/error.h"
#include "conveyor/common/file_fingerprint.h"
#include "conveyor/common/input_path.h"
#include "conveyor/common/range_check.h"
#include "conveyor/common/spellings.h"
#include "conveyor/common/text.h"
#include "conveyor/data/blended_lm_stream.h"
#include "conveyor/data/byte_tokenizer.h"
#include "conveyor/data/corpus.h"
#include "conveyor/data/load_tokenizer.h"
#include "conveyor/data/tokenizer.h"
#include "conveyor/mesh/mesh.h"
#include "conveyor/nn/hf_config.h"
#include "conveyor/nn/tensor_parallel_split.h"
#include "conveyor/optim/loss_scaler.h"
#include "conveyor/schedule/pipeline_limits.h"
#include "conveyor/sim/mesh_costs.h"
#include "conveyor/train/model_registry.h"

namespace conveyor {
namespace {

constexpr int64_t kMaxSteps = 1'000'000'000'000;  // 10^12 steps: no run gets near

constexpr Spellings<PartitionBy, 4> kPartitionBys = {{
    {PartitionBy::kParams, "params"},
    {PartitionBy::kFlops, "flops"},
    {PartitionBy::kUniform, "uniform"},
    {PartitionBy::kProfile, "profile"},
}};
// Calls visit(key, field, lo, hi) for every integer setting of `c` (a TrainConfig, const or
// not): its TOML key, the field and its allowed range [lo, hi]. The one table of ranges, the
// model's (sim/model_spec.h) first.
template <typename Config, typename Visit>
void ForEachInteger(Config& c, Visit&& visit) {
  ForEachModelInteger(c.model, visit);
  visit("pp", c.pp, 1, kMaxRanks);
  visit("dp", c.dp, 0, kMaxRanks);
  visit("tp", c.tp, 1, kMaxRanks);
  visit("cp", c.cp, 1, kMaxRanks);
  visit("ep", c.ep, 1, kMaxRanks);
  visit("microbatches", c.microbatches, 1, kMaxMicrobatches);
  visit("chunks", c.chunks, 0, kMaxChunks);
  visit("batch_size", c.batch_size, 1, 1 << 20);
  visit("steps", c.steps, 1, kMaxSteps);
  visit("seed", c.seed, 0, std::numeric_limits<int64_t>::max());
  visit("warmup_steps", c.warmup_steps, 0, kMaxSteps);
  visit("eval_every", c.eval_every, 0, kMaxSteps);
  visit("eval_batches", c.eval_batches, 1, 1'000'000);
  visit("checkpoint_every", c.checkpoint_every, 0, kMaxSteps);
  visit("sample_tokens", c.sample_tokens, 0, 1 << 20);
  visit("timeout", c.timeout_s, 1, 7 * 24 * 3600);
  visit("threads", c.threads, 0, 1024);
  visit("zero", c.zero, 0, 1);
  visit("loss_scale_window", c.loss_scale_window, 1, kMaxSteps);
  visit("memory_per_rank", c.memory_per_rank, 0, int64_t{1} << 50);
  visit("dp_bucket", c.dp_bucket, 0, int64_t{1} << 40);
}

// The same for the real settings; lo = nullopt means (0, hi]: zero itself is refused.
template <typename Config, typename Visit>
void ForEachReal(Config& c, Visit&& visit) {
  ForEachModelReal(c.model, visit);
  visit("lr", c.lr, std::nullopt, 10.0);
  visit("min_lr_ratio", c.min_lr_ratio, 0.0, 1.0);
  visit("weight_decay", c.weight_decay, 0.0, 10.0);
  visit("clip", c.clip, 0.0, 1e9);
  visit("loss_scale", c.loss_scale, 0.0, LossScaler::kMaxScale);
}

// "seq_len" -> "--seq-len".
std::string FlagName(std::string_view key) {
  std::string flag = "--" + std::string(key);
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

}  // namespace

void SetModel(TrainConfig& config, std::string_view text, std::string_view name) {
  // Anything of that name (a loop of links too) is a path, refused below unless a folder.
  std::error_code error;
  const bool path = !IsModelKindName(text) &&
                    (text.find('/') != std::string_view::npos ||
                     std::filesystem::exists(std::filesystem::symlink_status(text, error)));
  if (!path) {
    config.model.kind = ParseModelKind(text, name);
    config.model.model_dir.clear();
    return;
  }
  CheckInputPath(name, std::string(text), PathKind::kFolder);
  CONVEYOR_CHECK(
      std::filesystem::is_regular_file(std::filesystem::path(text) / "config.json", error))
      << name << ": '" << text << "' is not a model folder (no config.json there)";
  const HfModelConfig folder =
      ReadHfModelConfig((std::filesystem::path(text) / "config.json").string());
  config.model.kind = HfModelKind(folder);
  config.model.model_dir = std::string(text);
}

std::string ModelFolderNote(std::string_view text) {
  std::error_code error;
  if (!IsModelKindName(text) || !std::filesystem::is_directory(text, error)) return "";
  const std::string name(text);
  return "--model " + name + " is the built-in " + name + ", not the folder ./" + name +
         " here (--model ./" + name + " reads that folder)";
}

void ApplyModelFolder(TrainConfig& c) {
  ModelSpec& model = c.model;
  if (model.model_dir.empty()) return;
  const std::string path = (std::filesystem::path(model.model_dir) / "config.json").string();
  const HfModelConfig folder = ReadHfModelConfig(path);
  model.kind = HfModelKind(folder);
  ArchitectureOf(model.kind).ReadHfConfig(folder, path, model);
  CONVEYOR_CHECK(model.vocab >= static_cast<int>(ByteTokenizer::kVocabSize))
      << path << ": a vocabulary of " << model.vocab << " cannot hold the byte tokenizer's "
      << ByteTokenizer::kVocabSize << " ids";
}

ModelSpec ModelFolderSpec(const std::string& dir) {
  TrainConfig config;
  config.model.model_dir = dir;
  const int positions =
      ReadHfModelConfig((std::filesystem::path(dir) / "config.json").string()).positions();
  config.model.seq_len = std::min(positions, 65536);
  ApplyModelFolder(config);
  return config.model;
}

void ApplyTokenizer(TrainConfig& c) {
  if (c.tokenizer.empty() && !c.model.model_dir.empty()) {
    c.tokenizer = FolderTokenizer(c.model.model_dir, "--model");
  }
  if (c.tokenizer.empty() || c.tokenizer == "bytes" || !IsLanguageModel(c.model.kind)) return;
  const std::unique_ptr<Tokenizer> tokenizer = LoadTokenizer(c.tokenizer);
  if (c.model.vocab == 0) {
    CONVEYOR_CHECK(tokenizer->vocab_size() <= std::numeric_limits<int>::max())
        << "--tokenizer " << c.tokenizer << ": " << tokenizer->vocab_size() << " ids";
    c.model.vocab = static_cast<int>(tokenizer->vocab_size());
  }
  CheckTokenizerFits(*tokenizer, ModelSizes(c.model).vocab, "--tokenizer " + c.tokenizer);
}

std::vector<int> ParseStageLayers(std::string_view text, std::string_view name) {
  std::vector<int> sizes;
  size_t begin = 0;
  while (begin < text.size()) {
    const size_t end = std::min(text.find(',', begin), text.size());
    const std::string_view word = Trim(text.substr(begin, end - begin));
    int size = 0;
    const auto [ptr, ec] = std::from_chars(word.data(), word.data() + word.size(), size);
    CONVEYOR_CHECK(ec == std::errc() && ptr == word.data() + word.size() && size >= 1)
        << name << " '" << text << "' must list positive layer counts, one a stage (\"1,3,3,1\")";
    sizes.push_back(size);
    begin = end + 1;
  }
  return sizes;
}

std::vector<std::pair<std::string, std::string>> SettingsThatMustAgree(const TrainConfig& c) {
  std::vector<std::pair<std::string, std::string>> settings = {
      {"--model", std::string(ModelKindName(c.model.kind))},
      {"--model (folder)", c.model.model_dir},
      {"--data", c.data},
      {"--split", c.split},
      {"--tokenizer", c.tokenizer},
      {"--schedule", c.schedule},
      {"--mesh-order", c.mesh_order},
      {"--partition", std::string(PartitionByName(c.partition))},
      {"--stage-layers", c.stage_layers},
      {"--recompute", std::string(RecomputeName(c.recompute))},
      {"--device", std::string(DeviceKindName(c.device))},
      {"--dtype", std::string(ComputeDtypeName(c.dtype))},
      {"--checkpoint-dir", c.checkpoint_dir},
      {"--resume", c.resume},
      {"--tie-embeddings", c.model.tie_embeddings ? "true" : "false"},
      {"--shared-expert-gate", c.model.shared_expert_gate ? "true" : "false"},
      {"--router-sigmoid", c.model.router_sigmoid ? "true" : "false"},
      {"--router-plain-gates", c.model.router_plain_gates ? "true" : "false"},
      {"--drop-by-position", c.model.drop_by_position ? "true" : "false"},
      {"--mixtral-names", c.model.moe_mixtral_names ? "true" : "false"},
      {"--lora-targets", c.model.lora_targets},
      {"--skip-nonfinite-steps", c.skip_nonfinite_steps ? "true" : "false"},
      {"--sequential-pairs", c.sequential_pairs ? "true" : "false"},
      {"--sequence-parallel", c.sequence_parallel ? "true" : "false"},
      {"--document-mask", c.document_mask ? "true" : "false"},
      {"vocabulary", std::to_string(c.model.vocab)},
  };
  ForEachInteger(c, [&](std::string_view key, auto value, int64_t, int64_t) {
    if (key == "timeout" || key == "threads") return;  // a rank's own
    settings.emplace_back(FlagName(key), std::to_string(value));
  });
  ForEachReal(c, [&](std::string_view key, double value, auto, double) {
    char text[32];
    const auto end = std::to_chars(text, text + sizeof text, value).ptr;  // shortest exact
    settings.emplace_back(FlagName(key), std::string(text, end));
  });
  return settings;
}

std::vector<std::pair<std::string, std::string>> ContentsThatMustAgree(const TrainConfig& c) {
  std::vector<std::pair<std::string, std::string>> contents;
  auto add = [&](const std::string& flag, const std::string& fingerprints) {
    if (!fingerprints.empty()) contents.emplace_back(flag + " (contents)", fingerprints);
  };
  add("--model", c.model.model_dir.empty() ? "" : FileFingerprint(c.model.model_dir));
  std::string data;  // one a source, in the blend's order
  for (const auto& [weight, path] : ParseDataBlend(c.data)) {
    data += (data.empty() ? "" : " ") + FileFingerprint(path == "fortunes" ? kFortunesDir : path);
  }
  add("--data", data);
  add("--tokenizer",
      c.tokenizer.empty() || c.tokenizer == "bytes" ? "" : FileFingerprint(c.tokenizer));
  add("--resume", c.resume.empty() ? "" : FileFingerprint(c.resume));
  return contents;
}

int64_t DpBucketBytes(const TrainConfig& config, bool gpu) {
  if (config.dp_bucket > 0) return config.dp_bucket;
  return DefaultBucketBytes(gpu);
}

PartitionBy ParsePartitionBy(std::string_view text, std::string_view name) {
  return ParseSpelling(kPartitionBys, text, name);
}

std::string_view PartitionByName(PartitionBy partition) {
  return SpellingOf(kPartitionBys, partition);
}

void TrainConfig::Validate() const {
  ForEachInteger(*this, [](std::string_view key, auto value, int64_t lo, int64_t hi) {
    CheckInRange(FlagName(key), value, lo, hi);
  });
  ForEachReal(*this, [](std::string_view key, double value, std::optional<double> lo, double hi) {
    CheckInRealRange(FlagName(key), value, lo, hi);
  });
  CONVEYOR_CHECK(!cache_weight_casts || dtype != ComputeDtype::kFp32)
      << "--cache-weight-casts keeps the weights' bf16 or fp16 copies; --dtype fp32 makes none "
         "(use --dtype bf16 or fp16 with it)";
  CONVEYOR_CHECK(loss_scale == 0 || loss_scale >= 1)
      << "--loss-scale must be 0 (the dtype's default) or at least 1, got " << loss_scale;
  CONVEYOR_CHECK(model.hidden % model.heads == 0)
      << "hidden (" << model.hidden << ") must be a multiple of heads (" << model.heads << ")";
  CONVEYOR_CHECK(batch_size >= microbatches)
      << "batch-size (" << batch_size << ") must be at least microbatches (" << microbatches << ")";
  CONVEYOR_CHECK(batch_size >= static_cast<int64_t>(std::max(dp, 1)) * microbatches)
      << "batch-size (" << batch_size << ") must be at least dp x microbatches (" << dp << " x "
      << microbatches << "): every data-parallel replica runs every micro-batch";
  MeshOrderOf(*this);
  ParseStageLayers(stage_layers, "--stage-layers");
  CONVEYOR_CHECK(model.heads % tp == 0) << "heads (" << model.heads << ") must divide by tp (" << tp
                                        << "): each tensor-parallel rank holds heads / tp of them";
  const ModelArchitecture& architecture = ArchitectureOf(model.kind);
  architecture.Check(model, tp);
  if (sequence_parallel) {
    CONVEYOR_CHECK(tp > 1) << "--sequence-parallel splits each sequence over the tensor-parallel "
                              "ranks: it needs --tp 2 or more, got --tp "
                           << tp;
    CONVEYOR_CHECK(architecture.language_model())
        << "--sequence-parallel: the " << ModelKindName(model.kind)
        << " does not take it (its head pools whole sequences)";
    CONVEYOR_CHECK(model.seq_len % (cp * tp) == 0)
        << "--sequence-parallel splits each sequence over --tp " << tp << " ranks: --seq-len "
        << model.seq_len << (cp > 1 ? " / --cp " + std::to_string(cp) : std::string())
        << " must divide by it";
  }
  CONVEYOR_CHECK(!document_mask || architecture.language_model())
      << "--document-mask keeps the documents packed in a language model's samples apart; the "
      << ModelKindName(model.kind) << " takes whole examples";
  if (cp > 1) {
    CONVEYOR_CHECK(model.kind == ModelKind::kLlama && model.experts == 0)
        << "--cp " << cp << ": context parallelism runs a Llama without experts (ring attention "
        << "over rotary positions), not a " << ModelKindName(model.kind)
        << (model.experts > 0 ? " with experts" : "");
    CONVEYOR_CHECK(model.seq_len % (2 * cp) == 0)
        << "--cp " << cp << " cuts each sequence into 2 x " << cp << " chunks: --seq-len "
        << model.seq_len << " must divide by " << 2 * cp;
  }
  if (architecture.language_model()) CheckVocabularySplit(architecture.Sizes(model).vocab, tp);
  if (ep > 1) {
    CONVEYOR_CHECK(model.experts > 0)
        << "--ep " << ep << " divides a Mixture-of-Experts model's experts: this model has none "
        << "(--model llama --experts N)";
    CONVEYOR_CHECK(model.experts % ep == 0)
        << "the " << model.experts << " experts must divide evenly over --ep " << ep;
    CONVEYOR_CHECK(dp == 0 || (dp * tp) % ep == 0)
        << "--ep " << ep << " must divide --dp x --tp = " << dp << " x " << tp
        << ": each expert-parallel group is made of tensor- and data-parallel ranks";
  }
  CONVEYOR_CHECK(zero == 0 || tp == 1 || model.experts == 0)
      << "--zero 1 with --experts and --tp " << tp
      << ": the router's state, summed over the tensor- and data-parallel ranks, is not "
         "sharded yet";
  CheckPipelineSize(schedule, ScheduleOptions{pp, microbatches, chunks});
}

Mesh::Order MeshOrderOf(const TrainConfig& config) {
  if (config.cp == 1) return Mesh::ParseOrder(config.mesh_order);
  const Mesh::Order with_cp = {MeshAxis::kTp, MeshAxis::kCp, MeshAxis::kDp, MeshAxis::kPp};
  if (config.mesh_order.find("cp") != std::string::npos) {
    return Mesh::ParseOrder(config.mesh_order, with_cp);
  }
  Mesh::Order order = Mesh::ParseOrder(config.mesh_order);
  order.insert(std::find(order.begin(), order.end(), MeshAxis::kTp) + 1, MeshAxis::kCp);
  return order;
}

Mesh MeshOf(const TrainConfig& c, int world) {
  if (c.cp == 1) return Mesh::Make(world, c.dp, c.tp, c.pp, MeshOrderOf(c));
  const int others = c.cp * c.tp * c.pp;
  CONVEYOR_CHECK(c.dp > 0 || world % others == 0)
      << "cp " << c.cp << " x tp " << c.tp << " x pp " << c.pp << " = " << others
      << " ranks do not divide the world's " << world;
  const int dp = c.dp > 0 ? c.dp : world / others;
  std::vector<Mesh::Extent> axes;
  for (MeshAxis axis : MeshOrderOf(c)) {
    MeshCoords extents{.dp = dp, .tp = c.tp, .pp = c.pp, .cp = c.cp};
    axes.emplace_back(axis, extents.at(axis));
  }
  return Mesh::Make(world, axes);
}

void SetIntegerSetting(TrainConfig& config, std::string_view key, int64_t value,
                       std::string_view name) {
  bool found = false;
  ForEachInteger(config, [&](std::string_view k, auto& field, int64_t lo, int64_t hi) {
    if (k != key) return;
    CheckInRange(name, value, lo, hi);
    field = static_cast<std::remove_reference_t<decltype(field)>>(value);
    found = true;
  });
  CONVEYOR_ASSERT(found) << "no integer setting '" << key << "'";
}

void SetRealSetting(TrainConfig& config, std::string_view key, double value,
                    std::string_view name) {
  bool found = false;
  ForEachReal(config, [&](std::string_view k, double& field, std::optional<double> lo, double hi) {
    if (k != key) return;
    CheckInRealRange(name, value, lo, hi);
    field = value;
    found = true;
  });
  CONVEYOR_ASSERT(found) << "no real setting '" << key << "'";
  CONVEYOR_CHECK(key != "loss_scale" || value == 0 || value >= 1)
      << name << " must be 0 (the dtype's default) or at least 1, got " << value;
}

bool IsIntegerSetting(std::string_view key) {
  const TrainConfig defaults;
  bool found = false;
  ForEachInteger(defaults,
                 [&](std::string_view k, auto, int64_t, int64_t) { found = found || k == key; });
  return found;
}

bool IsRealSetting(std::string_view key) {
  const TrainConfig defaults;
  bool found = false;
  ForEachReal(defaults, [&](std::string_view k, double, std::optional<double>, double) {
    found = found || k == key;
  });
  return found;
}

void ApplyTomlFile(const std::string& path, TrainConfig& c) {
  const std::string content = ReadInputFile("config file", path);
  toml::table table;
  try {
    table = toml::parse(content, path);
  } catch (const toml::parse_error& e) {
    CONVEYOR_CHECK(false) << "cannot read config '" << path << "': " << e.description() << " (line "
                          << e.source().begin.line << ")";
  }
  using Setter = std::function<void(const toml::node&, const std::string&)>;
  auto string_of = [&path](const toml::node& n, const std::string& key) {
    auto v = n.value<std::string>();
    CONVEYOR_CHECK(v.has_value()) << path << ": '" << key << "' must be a string";
    return *v;
  };
  auto text = [&](std::string& field) -> Setter {
    return [&field, string_of](const toml::node& n, const std::string& key) {
      field = string_of(n, key);
    };
  };
  // An enum setting, read by `parse` (ParseModelKind, ...).
  auto choice = [&](auto& field, auto parse) -> Setter {
    return [&field, &path, string_of, parse](const toml::node& n, const std::string& key) {
      field = parse(string_of(n, key), path + ": " + key);
    };
  };
  auto boolean = [&](bool& field) -> Setter {
    return [&field, &path](const toml::node& n, const std::string& key) {
      auto v = n.value<bool>();
      CONVEYOR_CHECK(v.has_value() && n.is_boolean())
          << path << ": '" << key << "' must be true or false";
      field = *v;
    };
  };
  const std::map<std::string, Setter> setters = {
      {"model",
       [&c, &path, string_of](const toml::node& n, const std::string& key) {
         SetModel(c, string_of(n, key), path + ": " + key);
       }},
      {"tie_embeddings", boolean(c.model.tie_embeddings)},
      {"shared_expert_gate", boolean(c.model.shared_expert_gate)},
      {"router_sigmoid", boolean(c.model.router_sigmoid)},
      {"router_plain_gates", boolean(c.model.router_plain_gates)},
      {"drop_by_position", boolean(c.model.drop_by_position)},
      {"mixtral_names", boolean(c.model.moe_mixtral_names)},
      {"recompute", choice(c.recompute, ParseRecompute)},
      {"adamw_kernel", choice(c.adamw_kernel, ParseAdamWKernel)},
      {"device", choice(c.device, ParseDeviceKind)},
      {"dtype", choice(c.dtype, ParseComputeDtype)},
      {"lora_targets", text(c.model.lora_targets)},
      {"data", text(c.data)},
      {"split", text(c.split)},
      {"tokenizer", text(c.tokenizer)},
      {"schedule", text(c.schedule)},
      {"mesh_order",
       [&c, &path, string_of](const toml::node& n, const std::string& key) {
         c.mesh_order = string_of(n, key);
         try {
           Mesh::ParseOrder(c.mesh_order);
         } catch (const UserError& e) {
           CONVEYOR_CHECK(false) << path << ": " << key << ": " << e.what();
         }
       }},
      {"partition", choice(c.partition, ParsePartitionBy)},
      {"stage_layers",
       [&c, &path, string_of](const toml::node& n, const std::string& key) {
         c.stage_layers = string_of(n, key);
         ParseStageLayers(c.stage_layers, path + ": " + key);
       }},
      {"metrics", text(c.metrics)},
      {"trace", text(c.trace)},
      {"tensorboard", text(c.tensorboard)},
      {"checkpoint_dir", text(c.checkpoint_dir)},
      {"resume", text(c.resume)},
      {"skip_nonfinite_steps", boolean(c.skip_nonfinite_steps)},
      {"sequential_pairs", boolean(c.sequential_pairs)},
      {"sequence_parallel", boolean(c.sequence_parallel)},
      {"document_mask", boolean(c.document_mask)},
      {"cache_weight_casts", boolean(c.cache_weight_casts)},
      {"resume_with_changes", boolean(c.resume_with_changes)},
  };
  for (const auto& [key, node] : table) {
    const std::string name(key.str());
    if (IsIntegerSetting(name)) {
      // As 64 bits and range-checked: `layers = 4294967298` must not become 2. The type is
      // checked first: toml++'s value<int64_t>() converts any float, 1e62 too (undefined).
      CONVEYOR_CHECK(node.is_integer()) << path << ": '" << name << "' must be an integer";
      SetIntegerSetting(c, name, node.as_integer()->get(), path + ": " + name);
      continue;
    }
    if (IsRealSetting(name)) {
      auto v = node.value<double>();
      CONVEYOR_CHECK(v.has_value()) << path << ": '" << name << "' must be a number";
      SetRealSetting(c, name, *v, path + ": " + name);
      continue;
    }
    auto it = setters.find(name);
    CONVEYOR_CHECK(it != setters.end()) << path << ": unknown key '" << name << "'";
    it->second(node, name);
  }
}

}  // namespace conveyor
