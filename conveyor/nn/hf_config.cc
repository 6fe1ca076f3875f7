#include "conveyor/nn/hf_config.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

using Json = nlohmann::json;

// Fields that change nothing conveyor computes.
// transformers 5 saves the dtype as "dtype", earlier versions as "torch_dtype".
const std::set<std::string> kIgnoredFields = {
    "_name_or_path", "transformers_version", "torch_dtype", "dtype",      "bos_token_id",
    "eos_token_id",  "pad_token_id",         "use_cache",   "model_type", "initializer_range"};

class Fields {
 public:
  Fields(const Json& json, const std::string& path) : json_(json), path_(path) {}

  // The field `key` as an integer in [lo, hi]; `fallback` when absent (nullopt: required).
  int Integer(const std::string& key, std::optional<int> fallback, int64_t lo = 1,
              int64_t hi = std::numeric_limits<int>::max()) {
    read_.insert(key);
    if (!json_.contains(key) || json_[key].is_null()) {
      CONVEYOR_CHECK(fallback.has_value()) << path_ << ": lacks \"" << key << "\"";
      return *fallback;
    }
    const Json& v = json_[key];
    CONVEYOR_CHECK(v.is_number_integer() && v.get<int64_t>() >= lo && v.get<int64_t>() <= hi)
        << path_ << ": \"" << key << "\" must be an integer in [" << lo << ", " << hi << "], got "
        << v.dump();
    return static_cast<int>(v.get<int64_t>());
  }

  double Positive(const std::string& key, std::optional<double> fallback) {
    read_.insert(key);
    if (!json_.contains(key) || json_[key].is_null()) {
      CONVEYOR_CHECK(fallback.has_value()) << path_ << ": lacks \"" << key << "\"";
      return *fallback;
    }
    const Json& v = json_[key];
    CONVEYOR_CHECK(v.is_number() && v.get<double>() > 0)
        << path_ << ": \"" << key << "\" must be a positive number, got " << v.dump();
    return v.get<double>();
  }

  bool Boolean(const std::string& key, bool fallback) {
    read_.insert(key);
    if (!json_.contains(key) || json_[key].is_null()) return fallback;
    CONVEYOR_CHECK(json_[key].is_boolean())
        << path_ << ": \"" << key << "\" must be true or false, got " << json_[key].dump();
    return json_[key].get<bool>();
  }

  // The field, when present, must be one of `allowed` (null counting as absent).
  void Only(const std::string& key, const std::vector<Json>& allowed, const char* why) {
    read_.insert(key);
    if (!json_.contains(key) || json_[key].is_null()) return;
    for (const Json& value : allowed) {
      if (json_[key] == value) return;
    }
    CONVEYOR_CHECK(false) << path_ << ": \"" << key << "\" = " << json_[key].dump()
                          << " is not supported (" << why << ")";
  }

  // "architectures", when present, must list classes of `allowed` alone: those conveyor
  // reads a folder of `model_type` as.
  void Architectures(const std::string& model_type, const std::vector<std::string>& allowed) {
    read_.insert("architectures");
    if (!json_.contains("architectures") || json_["architectures"].is_null()) return;
    const Json& listed = json_["architectures"];
    bool known = listed.is_array();
    for (const Json& name : known ? listed : Json::array()) {
      known = known && name.is_string() &&
              std::find(allowed.begin(), allowed.end(), name.get<std::string>()) != allowed.end();
    }
    CONVEYOR_CHECK(known) << path_ << ": \"architectures\" = " << listed.dump()
                          << " does not match \"model_type\" = \"" << model_type
                          << "\" (conveyor reads a " << model_type << " folder as "
                          << Json(allowed).dump() << ")";
  }

  // A field read and deliberately not applied.
  void Ignore(const std::string& key) { read_.insert(key); }

  const Json& json() const { return json_; }
  const std::string& path() const { return path_; }

  // Every field was read, checked or is known to change nothing.
  void RefuseTheRest() const {
    for (const auto& [key, value] : json_.items()) {
      CONVEYOR_CHECK(read_.count(key) || kIgnoredFields.count(key))
          << path_ << ": field \"" << key << "\" (= " << value.dump()
          << ") is not supported: conveyor would not compute the model it describes";
    }
  }

 private:
  const Json& json_;
  const std::string& path_;
  std::set<std::string> read_;
};

Json ParseObject(const std::string& text, const std::string& path) {
  Json json;
  try {
    json = Json::parse(text);
  } catch (const Json::exception& e) {
    CONVEYOR_CHECK(false) << path << ": not JSON: " << e.what();
  }
  CONVEYOR_CHECK(json.is_object()) << path << ": not a JSON object";
  return json;
}

std::string ModelType(const Json& json) {
  return json.contains("model_type") && json["model_type"].is_string()
             ? json["model_type"].get<std::string>()
             : std::string();
}

// The model's config.json checked by `check` (CheckLlamaConfig, CheckGptConfig), its
// UserError naming the file.
template <typename Config>
void CheckIn(const std::string& path, const Config& config, void (*check)(const Config&)) {
  try {
    check(config);
  } catch (const UserError& e) {
    CONVEYOR_CHECK(false) << path << ": " << e.what();
  }
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  CONVEYOR_CHECK(in.good()) << "cannot read " << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Whether `type` is a model_type conveyor reads as a Llama.
bool IsLlamaType(const std::string& type) {
  return type == "llama" || type == "qwen2" || type == "mixtral" || type == "qwen2_moe" ||
         type == "qwen3_moe" || type == "olmoe";
}

// Qwen2's and Qwen2-MoE's: biases on the query, key and value projections.
bool IsQwen2(const std::string& type) { return type == "qwen2" || type == "qwen2_moe"; }

// The architecture a Llama of model_type `type` (IsLlamaType) is saved as.
const char* HfArchitecture(const std::string& type) {
  return type == "llama"       ? "LlamaForCausalLM"
         : type == "qwen2"     ? "Qwen2ForCausalLM"
         : type == "mixtral"   ? "MixtralForCausalLM"
         : type == "qwen2_moe" ? "Qwen2MoeForCausalLM"
         : type == "olmoe"     ? "OlmoeForCausalLM"
                               : "Qwen3MoeForCausalLM";
}

// "num_experts", or with `local_too` "num_local_experts" in its stead (transformers 5's
// name for Qwen3-MoE's count); both present must agree.
int ExpertCount(Fields& f, bool local_too) {
  if (!local_too || !f.json().contains("num_local_experts")) {
    return f.Integer("num_experts", std::nullopt);
  }
  const int local = f.Integer("num_local_experts", std::nullopt);
  if (f.json().contains("num_experts") && !f.json()["num_experts"].is_null()) {
    const int experts = f.Integer("num_experts", std::nullopt);
    CONVEYOR_CHECK(experts == local) << f.path() << ": \"num_experts\" = " << experts
                                     << " and \"num_local_experts\" = " << local << " disagree";
  }
  return local;
}

// The rotary embeddings' base: "rope_theta", or transformers 5's "rope_parameters"
// ({"rope_type": "default", "rope_theta": ...}; any other rope_type or key is refused, as
// rope_scaling is); `fallback` when neither holds one.
double RopeTheta(Fields& f, double fallback) {
  const double top = f.Positive("rope_theta", fallback);
  f.Ignore("rope_parameters");
  const Json& params = f.json().value("rope_parameters", Json());
  if (params.is_null()) return top;
  CONVEYOR_CHECK(params.is_object())
      << f.path() << ": \"rope_parameters\" must be an object, got " << params.dump();
  for (const auto& [key, value] : params.items()) {
    CONVEYOR_CHECK((key == "rope_type" && value == Json("default")) || key == "rope_theta")
        << f.path() << ": \"rope_parameters\" = " << params.dump()
        << " is not supported (rotary embeddings are not scaled: rope_type \"default\" and "
           "rope_theta alone)";
  }
  if (!params.contains("rope_theta")) return top;
  const Json& theta = params["rope_theta"];
  CONVEYOR_CHECK(theta.is_number() && theta.get<double>() > 0)
      << f.path() << ": \"rope_parameters\".\"rope_theta\" must be a positive number, got "
      << theta.dump();
  CONVEYOR_CHECK(!f.json().contains("rope_theta") || f.json()["rope_theta"].is_null() ||
                 top == theta.get<double>())
      << f.path() << ": \"rope_theta\" = " << top
      << " and \"rope_parameters\".\"rope_theta\" = " << theta.dump() << " disagree";
  return theta.get<double>();
}

// The Mixture-of-Experts fields of a Mixtral, Qwen2-MoE, Qwen3-MoE or OLMoE config.json into
// c.moe.
void ReadMoeFields(Fields& f, const std::string& type, LlamaConfig& c) {
  LlamaMoe moe;
  MoeConfig& block = moe.block;
  block.hidden = c.hidden;
  block.top_k = f.Integer("num_experts_per_tok", std::nullopt);
  if (type == "mixtral") {
    block.experts = f.Integer("num_local_experts", std::nullopt);
    block.expert_units = c.intermediate;  // every layer sparse: intermediate_size is an expert's
    block.mixtral_names = true;
    moe.prefix = "block_sparse_moe";
    f.Only("router_jitter_noise", {0, 0.0}, "the router adds no noise");
  } else if (type == "olmoe") {
    block.experts = f.Integer("num_experts", std::nullopt);
    block.expert_units = c.intermediate;  // every layer sparse: intermediate_size is an expert's
    block.renormalize = f.Boolean("norm_topk_prob", false);
    f.Only("clip_qkv", {}, "queries, keys and values are not clipped");
  } else {                      // qwen2_moe, qwen3_moe
    if (type == "qwen2_moe") {  // a shared expert every token passes through, gated
      block.shared_units = f.Integer("shared_expert_intermediate_size", std::nullopt);
      block.shared_gate = true;
    }
    // transformers 5 saves Qwen3-MoE's expert count as "num_local_experts".
    block.experts = ExpertCount(f, type == "qwen3_moe");
    block.expert_units = f.Integer("moe_intermediate_size", std::nullopt);
    block.renormalize = f.Boolean("norm_topk_prob", false);
    moe.sparse_step = f.Integer("decoder_sparse_step", 1);
    f.Ignore("mlp_only_layers");
    const Json& dense = f.json().value("mlp_only_layers", Json::array());
    CONVEYOR_CHECK(dense.is_array()) << f.path() << ": \"mlp_only_layers\" must be a list";
    for (const Json& layer : dense) {
      CONVEYOR_CHECK(layer.is_number_integer())
          << f.path() << ": \"mlp_only_layers\" must list layer numbers, got " << dense.dump();
      moe.dense_layers.push_back(layer.get<int>());
    }
  }
  // Training settings, not the model: the flags choose the auxiliary loss.
  f.Ignore("router_aux_loss_coef");
  f.Ignore("output_router_logits");
  c.moe = moe;
}

// The model of a config.json already parsed and of its model_type `type` (checked by the
// caller): IsLlamaType.
LlamaConfig LlamaFromJson(const Json& json, const std::string& path, const std::string& type) {
  Fields f(json, path);
  f.Architectures(type, {HfArchitecture(type)});
  LlamaConfig c;
  c.hidden = f.Integer("hidden_size", std::nullopt);
  c.intermediate = f.Integer("intermediate_size", std::nullopt);
  c.heads = f.Integer("num_attention_heads", std::nullopt);
  c.kv_heads = f.Integer("num_key_value_heads", c.heads);
  c.layers = f.Integer("num_hidden_layers", std::nullopt);
  c.vocab = f.Integer("vocab_size", std::nullopt, 2);
  c.max_seq_len = f.Integer("max_position_embeddings", 2048);
  c.rms_norm_eps = f.Positive("rms_norm_eps", std::nullopt);
  c.rope_theta = RopeTheta(f, type == "mixtral" ? 1e6 : 10000.0);
  c.tie_embeddings = f.Boolean("tie_word_embeddings", false);
  // Qwen3 normalises every head's queries and keys, OLMoE the whole projections.
  c.qk_norm = type == "qwen3_moe" ? QkNorm::kHead
              : type == "olmoe"   ? QkNorm::kProjection
                                  : QkNorm::kNone;
  if (IsQwen2(type)) c.qkv_bias = f.Boolean("qkv_bias", true);
  if (type != "llama" && type != "qwen2") ReadMoeFields(f, type, c);
  // Without a sliding window (refused below) Qwen's layers of one change nothing.
  if (type != "llama") f.Ignore("max_window_layers");
  f.Only("hidden_act", {"silu"}, "the MLP is SwiGLU: silu");
  f.Only("attention_bias", {false}, "the projections have no biases");
  f.Only("mlp_bias", {false}, "the projections have no biases");
  f.Only("rope_scaling", {}, "rotary embeddings are not scaled");
  f.Only("use_sliding_window", {false}, "attention is over the whole sequence");
  if (json.value("use_sliding_window", Json(true)) == Json(false)) {
    f.Ignore("sliding_window");  // a window size that is not used (Qwen's configs hold one)
  } else {
    f.Only("sliding_window", {}, "attention is over the whole sequence");
  }
  // transformers 5 lists every layer's attention (Qwen2's, Qwen2-MoE's): all full, or refused.
  f.Ignore("layer_types");
  const Json& kinds = json.value("layer_types", Json());
  CONVEYOR_CHECK(kinds.is_null() ||
                 (kinds.is_array() && kinds.size() == static_cast<size_t>(c.layers) &&
                  std::all_of(kinds.begin(), kinds.end(),
                              [](const Json& k) { return k == Json("full_attention"); })))
      << path << ": \"layer_types\" = " << kinds.dump() << " is not supported (every one of the "
      << c.layers << " layers attends over the whole sequence: \"full_attention\")";
  f.Only("attention_dropout", {0, 0.0}, "no dropout");
  f.Only("pretraining_tp", {1}, "the plain linear maps");
  f.Only("head_dim", {c.heads > 0 ? c.hidden / c.heads : 0},
         "the head size is hidden_size / num_attention_heads");
  f.RefuseTheRest();
  CheckIn(path, c, &CheckLlamaConfig);
  return c;
}

GptConfig Gpt2FromJson(const Json& json, const std::string& path) {
  Fields f(json, path);
  f.Architectures("gpt2", {"GPT2LMHeadModel", "GPT2Model"});
  GptConfig c;
  c.hidden = f.Integer("n_embd", std::nullopt);
  c.heads = f.Integer("n_head", std::nullopt);
  c.layers = f.Integer("n_layer", std::nullopt);
  c.max_seq_len = f.Integer("n_positions", 1024);
  c.vocab = f.Integer("vocab_size", std::nullopt, 2);
  c.tie_embeddings = f.Boolean("tie_word_embeddings", true);
  f.Only("activation_function", {"gelu_new", "gelu_pytorch_tanh", "gelu"},
         "the MLP's GELU, exact or in its tanh approximation");
  c.gelu_tanh = json.value("activation_function", Json("gelu_new")) != Json("gelu");
  f.Only("n_inner", {4 * c.hidden}, "the MLP is 4 x n_embd wide");
  f.Only("n_ctx", {c.max_seq_len}, "the positions are n_positions");
  f.Only("layer_norm_epsilon", {1e-5}, "LayerNorm's epsilon is 1e-5");
  f.Only("scale_attn_weights", {true}, "attention scores are scaled by 1/sqrt(head size)");
  f.Only("scale_attn_by_inverse_layer_idx", {false}, "attention scores are not scaled by layer");
  f.Only("reorder_and_upcast_attn", {false}, "attention in the model's precision");
  f.Only("add_cross_attention", {false}, "a decoder alone");
  // Dropout rates (conveyor trains without dropout) and the sequence-classification head's
  // settings (unused by a language model): read, not applied.
  for (const char* key : {"resid_pdrop", "embd_pdrop", "attn_pdrop", "summary_first_dropout",
                          "summary_type", "summary_use_proj", "summary_activation",
                          "summary_proj_to_labels", "task_specific_params"}) {
    f.Ignore(key);
  }
  f.RefuseTheRest();
  CheckIn(path, c, &CheckGptConfig);
  return c;
}

// The config.json `text` parsed, its model_type checked to be `type`.
Json ParseOfType(const std::string& text, const std::string& path, const std::string& type) {
  Json json = ParseObject(text, path);
  CONVEYOR_CHECK(ModelType(json) == type) << path << ": model_type \"" << ModelType(json)
                                          << "\" is not supported here (" << type << ")";
  return json;
}

}  // namespace

LlamaConfig ParseHfLlamaConfig(const std::string& text, const std::string& path) {
  const Json json = ParseObject(text, path);
  const std::string type = ModelType(json);
  CONVEYOR_CHECK(IsLlamaType(type))
      << path << ": model_type \"" << type
      << "\" is not supported here (llama, qwen2, mixtral, qwen2_moe, qwen3_moe, olmoe)";
  return LlamaFromJson(json, path, type);
}

GptConfig ParseHfGpt2Config(const std::string& text, const std::string& path) {
  return Gpt2FromJson(ParseOfType(text, path, "gpt2"), path);
}

HfModelConfig ReadHfModelConfig(const std::string& path) {
  const Json json = ParseObject(ReadText(path), path);
  HfModelConfig config;
  config.type = ModelType(json);
  if (config.gpt2()) {
    config.gpt = Gpt2FromJson(json, path);
  } else {
    CONVEYOR_CHECK(IsLlamaType(config.type))
        << path << ": model_type \"" << config.type
        << "\" is not supported (llama, qwen2, mixtral, qwen2_moe, qwen3_moe, olmoe, gpt2)";
    config.llama = LlamaFromJson(json, path, config.type);
  }
  return config;
}

std::string HfModelConfigJson(const HfModelConfig& config, const std::string& torch_dtype) {
  return config.gpt2() ? HfGpt2ConfigJson(config.gpt, torch_dtype)
                       : HfLlamaConfigJson(config.llama, torch_dtype);
}

std::string HfGpt2ConfigJson(const GptConfig& c, const std::string& torch_dtype) {
  const Json json = {{"architectures", {"GPT2LMHeadModel"}},
                     {"model_type", "gpt2"},
                     {"n_embd", c.hidden},
                     {"n_head", c.heads},
                     {"n_layer", c.layers},
                     {"n_positions", c.max_seq_len},
                     {"vocab_size", c.vocab},
                     {"activation_function", c.gelu_tanh ? "gelu_new" : "gelu"},
                     {"layer_norm_epsilon", 1e-5},
                     {"tie_word_embeddings", c.tie_embeddings},
                     {"resid_pdrop", 0.0},
                     {"embd_pdrop", 0.0},
                     {"attn_pdrop", 0.0},
                     {"torch_dtype", torch_dtype}};
  return json.dump(2) + "\n";
}

std::string HfLlamaModelType(const LlamaConfig& c) {
  if (!c.moe) {
    CONVEYOR_CHECK(c.qk_norm == QkNorm::kNone)
        << "a dense Llama with query and key norms has no Hugging Face layout conveyor writes";
    return c.qkv_bias ? "qwen2" : "llama";
  }
  const LlamaMoe& moe = *c.moe;
  const MoeConfig& block = moe.block;
  CONVEYOR_CHECK(block.scoring == RouterScoring::kSoftmax && block.capacity_factor == 0 &&
                 moe.first_dense == 0 && block.bias_rate == 0)
      << "a Mixture-of-Experts model with sigmoid scores, a capacity, first dense layers or "
         "selection biases (--router-bias-rate) has no Hugging Face layout conveyor writes "
         "(Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE)";
  if (block.shared_units > 0 || c.qkv_bias) {
    CONVEYOR_CHECK(block.shared_units > 0 && block.shared_gate && c.qkv_bias &&
                   c.qk_norm == QkNorm::kNone && !block.mixtral_names)
        << "a Qwen2-MoE has a gated shared expert, query, key and value biases and no query "
           "and key norms; no other Hugging Face layout conveyor writes has a shared expert or "
           "those biases";
    return "qwen2_moe";
  }
  if (block.mixtral_names) {
    CONVEYOR_CHECK(block.renormalize && c.qk_norm == QkNorm::kNone && moe.sparse_step == 1 &&
                   moe.dense_layers.empty() && block.expert_units == c.intermediate)
        << "a Mixtral renormalises its gates, has no query and key norms, every layer sparse "
           "and intermediate_size units an expert";
    return "mixtral";
  }
  if (c.qk_norm == QkNorm::kProjection) {
    CONVEYOR_CHECK(moe.sparse_step == 1 && moe.dense_layers.empty() &&
                   block.expert_units == c.intermediate)
        << "an OLMoE has every layer sparse and intermediate_size units an expert";
    return "olmoe";
  }
  CONVEYOR_CHECK(c.qk_norm == QkNorm::kHead)
      << "no Hugging Face layout holds this Mixture-of-Experts model: a Mixtral's has "
         "Mixtral's names (train with --mixtral-names), a Qwen3-MoE's normalises each head's "
         "queries and keys and an OLMoE's its whole projections (those come from a folder)";
  return "qwen3_moe";
}

std::string HfLlamaConfigJson(const LlamaConfig& c, const std::string& torch_dtype) {
  const std::string type = HfLlamaModelType(c);
  Json json = {{"architectures", {HfArchitecture(type)}},
               {"model_type", type},
               {"hidden_size", c.hidden},
               {"intermediate_size", c.intermediate},
               {"num_attention_heads", c.heads},
               {"num_key_value_heads", c.kv_heads},
               {"num_hidden_layers", c.layers},
               {"vocab_size", c.vocab},
               {"max_position_embeddings", c.max_seq_len},
               {"rms_norm_eps", c.rms_norm_eps},
               {"rope_theta", c.rope_theta},
               {"tie_word_embeddings", c.tie_embeddings},
               {"hidden_act", "silu"},
               {"torch_dtype", torch_dtype}};
  if (type == "llama") json["mlp_bias"] = false;
  if (IsQwen2(type)) {
    json["use_sliding_window"] = false;  // their projections' biases are fixed: no field
  } else {
    json["attention_bias"] = false;
  }
  if (c.moe) json["num_experts_per_tok"] = c.moe->block.top_k;
  if (type == "mixtral") json["num_local_experts"] = c.moe->block.experts;
  if (type == "olmoe") {
    json["num_experts"] = c.moe->block.experts;
    json["norm_topk_prob"] = c.moe->block.renormalize;
  }
  if (type == "qwen2_moe") {
    json["shared_expert_intermediate_size"] = c.moe->block.shared_units;
  }
  if (type == "qwen2_moe" || type == "qwen3_moe") {
    json["num_experts"] = c.moe->block.experts;
    json["moe_intermediate_size"] = c.moe->block.expert_units;
    json["norm_topk_prob"] = c.moe->block.renormalize;
    json["decoder_sparse_step"] = c.moe->sparse_step;
    json["mlp_only_layers"] = c.moe->dense_layers;
  }
  return json.dump(2) + "\n";
}

}  // namespace conveyor
