#include "conveyor/train/train_config.h"

#include <toml++/toml.h>

#include <functional>
#include <map>

#include "conveyor/common/error.h"

namespace conveyor {

void TrainConfig::Validate() const {
  CONVEYOR_CHECK(model == "gpt" || model == "classifier")
      << "model must be gpt or classifier, got '" << model << "'";
  CONVEYOR_CHECK(layers >= 1) << "layers must be at least 1, got " << layers;
  CONVEYOR_CHECK(hidden >= 1) << "hidden must be at least 1, got " << hidden;
  CONVEYOR_CHECK(heads >= 1 && hidden % heads == 0)
      << "hidden (" << hidden << ") must be a multiple of heads (" << heads << ")";
  CONVEYOR_CHECK(seq_len >= 2) << "seq-len must be at least 2, got " << seq_len;
  CONVEYOR_CHECK(classes >= 2) << "classes must be at least 2, got " << classes;
  CONVEYOR_CHECK(pp >= 1) << "pp must be at least 1, got " << pp;
  CONVEYOR_CHECK(microbatches >= 1) << "microbatches must be at least 1, got " << microbatches;
  CONVEYOR_CHECK(batch_size >= microbatches)
      << "batch-size (" << batch_size << ") must be at least microbatches (" << microbatches << ")";
  CONVEYOR_CHECK(partition == "params" || partition == "flops" || partition == "uniform" ||
                 partition == "profile")
      << "partition must be params, flops, uniform or profile, got '" << partition << "'";
  CONVEYOR_CHECK(steps >= 1) << "steps must be at least 1, got " << steps;
  CONVEYOR_CHECK(lr > 0) << "lr must be positive, got " << lr;
  CONVEYOR_CHECK(warmup_steps >= 0) << "warmup-steps must be >= 0, got " << warmup_steps;
  CONVEYOR_CHECK(min_lr_ratio >= 0 && min_lr_ratio <= 1)
      << "min-lr-ratio must be within [0, 1], got " << min_lr_ratio;
  CONVEYOR_CHECK(weight_decay >= 0) << "weight-decay must be >= 0, got " << weight_decay;
  CONVEYOR_CHECK(clip >= 0) << "clip must be >= 0, got " << clip;
  CONVEYOR_CHECK(eval_every >= 0) << "eval-every must be >= 0, got " << eval_every;
  CONVEYOR_CHECK(eval_batches >= 1) << "eval-batches must be at least 1, got " << eval_batches;
  CONVEYOR_CHECK(checkpoint_every >= 0)
      << "checkpoint-every must be >= 0, got " << checkpoint_every;
  CONVEYOR_CHECK(sample_tokens >= 0) << "sample-tokens must be >= 0, got " << sample_tokens;
  CONVEYOR_CHECK(recompute == "none" || recompute == "full" || recompute == "selective")
      << "recompute must be none, full or selective, got '" << recompute << "'";
  CONVEYOR_CHECK(timeout_s >= 1) << "timeout must be at least 1 s, got " << timeout_s;
  CONVEYOR_CHECK(threads >= 0 && threads <= 1024)
      << "threads must be within [0, 1024] (0 = automatic), got " << threads;
}

void ApplyTomlFile(const std::string& path, TrainConfig& c) {
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    CONVEYOR_CHECK(false) << "cannot read config '" << path << "': " << e.description() << " (line "
                          << e.source().begin.line << ")";
  }
  using Setter = std::function<void(const toml::node&, const std::string&)>;
  auto text = [&](std::string& field) -> Setter {
    return [&field, &path](const toml::node& n, const std::string& key) {
      auto v = n.value<std::string>();
      CONVEYOR_CHECK(v.has_value()) << path << ": '" << key << "' must be a string";
      field = *v;
    };
  };
  auto integer = [&](auto& field) -> Setter {
    return [&field, &path](const toml::node& n, const std::string& key) {
      auto v = n.value<int64_t>();
      CONVEYOR_CHECK(v.has_value() && n.is_integer())
          << path << ": '" << key << "' must be an integer";
      field = static_cast<std::remove_reference_t<decltype(field)>>(*v);
    };
  };
  auto real = [&](double& field) -> Setter {
    return [&field, &path](const toml::node& n, const std::string& key) {
      auto v = n.value<double>();
      CONVEYOR_CHECK(v.has_value()) << path << ": '" << key << "' must be a number";
      field = *v;
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
      {"model", text(c.model)},
      {"layers", integer(c.layers)},
      {"hidden", integer(c.hidden)},
      {"heads", integer(c.heads)},
      {"seq_len", integer(c.seq_len)},
      {"tie_embeddings", boolean(c.tie_embeddings)},
      {"recompute", text(c.recompute)},
      {"classes", integer(c.classes)},
      {"data", text(c.data)},
      {"schedule", text(c.schedule)},
      {"pp", integer(c.pp)},
      {"microbatches", integer(c.microbatches)},
      {"chunks", integer(c.chunks)},
      {"partition", text(c.partition)},
      {"batch_size", integer(c.batch_size)},
      {"steps", integer(c.steps)},
      {"seed", integer(c.seed)},
      {"lr", real(c.lr)},
      {"warmup_steps", integer(c.warmup_steps)},
      {"min_lr_ratio", real(c.min_lr_ratio)},
      {"weight_decay", real(c.weight_decay)},
      {"clip", real(c.clip)},
      {"eval_every", integer(c.eval_every)},
      {"eval_batches", integer(c.eval_batches)},
      {"metrics", text(c.metrics)},
      {"trace", text(c.trace)},
      {"checkpoint_dir", text(c.checkpoint_dir)},
      {"checkpoint_every", integer(c.checkpoint_every)},
      {"resume", text(c.resume)},
      {"sample_tokens", integer(c.sample_tokens)},
      {"timeout", integer(c.timeout_s)},
      {"threads", integer(c.threads)},
  };
  for (const auto& [key, node] : table) {
    const std::string name(key.str());
    auto it = setters.find(name);
    CONVEYOR_CHECK(it != setters.end()) << path << ": unknown key '" << name << "'";
    it->second(node, name);
  }
}

}  // namespace conveyor
