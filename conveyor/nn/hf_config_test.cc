#include "conveyor/nn/hf_config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

// The shape of a Llama 3 config.json as Hugging Face writes it, at a small size.
std::string LlamaJson(const std::string& extra = "") {
  return R"({
  "_name_or_path": "tiny",
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 1,
  "eos_token_id": 2,
  "head_dim": 16,
  "hidden_act": "silu",
  "hidden_size": 64,
  "initializer_range": 0.02,
  "intermediate_size": 176,
  "max_position_embeddings": 512,
  "mlp_bias": false,
  "model_type": "llama",
  "num_attention_heads": 4,
  "num_hidden_layers": 3,
  "num_key_value_heads": 2,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 500000.0,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.44.0",
  "use_cache": true,)" +
         extra + R"(
  "vocab_size": 320
})";
}

void ExpectRefused(const std::string& json, const std::string& text) {
  try {
    ParseHfLlamaConfig(json, "m/config.json");
    ADD_FAILURE() << "accepted; expected: " << text;
  } catch (const UserError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("m/config.json"), std::string::npos) << what;
    EXPECT_NE(what.find(text), std::string::npos) << what;
  }
}

TEST(HfConfigTest, ReadsALlamaConfig) {
  const LlamaConfig c = ParseHfLlamaConfig(LlamaJson(), "m/config.json");
  EXPECT_EQ(c.hidden, 64);
  EXPECT_EQ(c.intermediate, 176);
  EXPECT_EQ(c.heads, 4);
  EXPECT_EQ(c.kv_heads, 2);
  EXPECT_EQ(c.layers, 3);
  EXPECT_EQ(c.vocab, 320);
  EXPECT_EQ(c.max_seq_len, 512);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000);
  EXPECT_TRUE(c.tie_embeddings);
}

// What conveyor writes it reads back as the same model, field by field.
TEST(HfConfigTest, WritesWhatItReads) {
  const LlamaConfig c = ParseHfLlamaConfig(LlamaJson(), "m/config.json");
  const std::string json = HfLlamaConfigJson(c, "bfloat16");
  EXPECT_NE(json.find("\"torch_dtype\": \"bfloat16\""), std::string::npos) << json;
  const LlamaConfig back = ParseHfLlamaConfig(json, "out/config.json");
  EXPECT_EQ(back.hidden, c.hidden);
  EXPECT_EQ(back.intermediate, c.intermediate);
  EXPECT_EQ(back.heads, c.heads);
  EXPECT_EQ(back.kv_heads, c.kv_heads);
  EXPECT_EQ(back.layers, c.layers);
  EXPECT_EQ(back.vocab, c.vocab);
  EXPECT_EQ(back.max_seq_len, c.max_seq_len);
  EXPECT_EQ(back.rms_norm_eps, c.rms_norm_eps);
  EXPECT_EQ(back.rope_theta, c.rope_theta);
  EXPECT_EQ(back.tie_embeddings, c.tie_embeddings);
}

TEST(HfConfigTest, DefaultsAreHuggingFaces) {
  const std::string minimal = R"({"model_type": "llama", "hidden_size": 32,
      "intermediate_size": 64, "num_attention_heads": 4, "num_hidden_layers": 1,
      "vocab_size": 100, "rms_norm_eps": 1e-5})";
  const LlamaConfig c = ParseHfLlamaConfig(minimal, "m/config.json");
  EXPECT_EQ(c.kv_heads, 4);  // no grouping
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000);
  EXPECT_FALSE(c.tie_embeddings);
  EXPECT_EQ(c.max_seq_len, 2048);
}

// transformers 5 writes "dtype" for "torch_dtype", the rotary base inside "rope_parameters"
// a Qwen3-MoE's expert count as "num_local_experts" and every layer's attention in
// "layer_types": read as the fields they replace; rope_parameters of any other rope_type, a
// layer of other attention, or fields disagreeing with those beside them refused.
TEST(HfConfigTest, ReadsTheFieldsTransformers5Writes) {
  std::string v5 = LlamaJson(R"( "dtype": "float32",
  "rope_parameters": {"rope_theta": 250000.0, "rope_type": "default"},)");
  v5.replace(v5.find("\"rope_theta\": 500000.0,"), 24, "");
  v5.replace(v5.find("\"torch_dtype\": \"bfloat16\","), 26, "");
  EXPECT_DOUBLE_EQ(ParseHfLlamaConfig(v5, "m/config.json").rope_theta, 250000);
  // Beside rope_theta: the same base, or refused.
  ExpectRefused(LlamaJson(R"( "rope_parameters": {"rope_theta": 250000.0},)"), "disagree");
  EXPECT_DOUBLE_EQ(
      ParseHfLlamaConfig(LlamaJson(R"( "rope_parameters": {"rope_theta": 500000.0},)"), "m")
          .rope_theta,
      500000);
  ExpectRefused(LlamaJson(R"( "rope_parameters": {"rope_type": "llama3", "factor": 8.0},)"),
                "\"rope_parameters\" = ");
  ExpectRefused(LlamaJson(R"( "rope_parameters": {"rope_type": "default", "factor": 2},)"),
                "is not supported");
  // Every layer's attention listed (Qwen2's): whole-sequence attention alone is read.
  EXPECT_EQ(
      ParseHfLlamaConfig(
          LlamaJson(R"( "layer_types": ["full_attention", "full_attention", "full_attention"],)"),
          "m")
          .layers,
      3);
  ExpectRefused(
      LlamaJson(R"( "layer_types": ["full_attention", "sliding_attention", "full_attention"],)"),
      "\"layer_types\" = ");
  ExpectRefused(LlamaJson(R"( "layer_types": ["full_attention"],)"), "\"layer_types\" = ");
  std::string qwen3 = LlamaJson(R"( "num_local_experts": 4, "num_experts_per_tok": 2,
  "moe_intermediate_size": 24, "decoder_sparse_step": 1, "mlp_only_layers": [1],)");
  qwen3.replace(qwen3.find("\"llama\""), 7, "\"qwen3_moe\"");
  qwen3.replace(qwen3.find("LlamaForCausalLM"), 16, "Qwen3MoeForCausalLM");
  const LlamaConfig c = ParseHfLlamaConfig(qwen3, "m/config.json");
  ASSERT_TRUE(c.moe.has_value());
  EXPECT_EQ(c.moe->block.experts, 4);
  std::string both = qwen3;
  both.replace(both.find("\"num_local_experts\": 4,"), 23,
               "\"num_local_experts\": 4, \"num_experts\": 8,");
  ExpectRefused(both, "\"num_experts\" = 8 and \"num_local_experts\" = 4 disagree");
}

// Whatever conveyor would compute differently is refused, naming the field and its value.
TEST(HfConfigTest, RefusesWhatConveyorWouldComputeDifferently) {
  ExpectRefused(LlamaJson(R"( "rope_scaling": {"type": "linear", "factor": 2.0},)"),
                "\"rope_scaling\"");
  ExpectRefused(LlamaJson(R"( "sliding_window": 4096,)"), "\"sliding_window\" = 4096");
  ExpectRefused(LlamaJson(R"( "quantization_config": {},)"), "field \"quantization_config\"");
  std::string gelu = LlamaJson();
  gelu.replace(gelu.find("\"silu\""), 6, "\"gelu\"");
  ExpectRefused(gelu, "\"hidden_act\" = \"gelu\"");
  std::string bias = LlamaJson();
  bias.replace(bias.find("\"attention_bias\": false"), 23, "\"attention_bias\": true");
  ExpectRefused(bias, "\"attention_bias\" = true");
  std::string head = LlamaJson();
  head.replace(head.find("\"head_dim\": 16"), 14, "\"head_dim\": 32");
  ExpectRefused(head, "\"head_dim\" = 32");
}

TEST(HfConfigTest, RefusesMissingOrMalformedFields) {
  std::string missing = LlamaJson();
  missing.replace(missing.find("\"intermediate_size\": 176,"), 25, "");
  ExpectRefused(missing, "lacks \"intermediate_size\"");
  std::string text = LlamaJson();
  text.replace(text.find("\"num_hidden_layers\": 3"), 22, "\"num_hidden_layers\": \"3\"");
  ExpectRefused(text, "\"num_hidden_layers\" must be an integer");
  std::string type = LlamaJson();
  type.replace(type.find("\"llama\""), 7, "\"gpt2\"");
  ExpectRefused(type, "model_type \"gpt2\"");
  ExpectRefused("[1, 2]", "not a JSON object");
  ExpectRefused("{", "not JSON");
  std::string groups = LlamaJson();
  groups.replace(groups.find("\"num_key_value_heads\": 2"), 24, "\"num_key_value_heads\": 3");
  ExpectRefused(groups, "kv_heads (3) must divide heads (4)");
}

// `text` with its first `from` replaced by `to`.
std::string Replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

// "architectures" must agree with "model_type": a GPT-2's class in a llama's file (or the
// other way round) is refused, naming both keys; absent, or GPT2Model, it is accepted.
TEST(HfConfigTest, RefusesArchitecturesThatContradictTheModelType) {
  ExpectRefused(Replaced(LlamaJson(), "LlamaForCausalLM", "GPT2LMHeadModel"),
                "\"architectures\" = [\"GPT2LMHeadModel\"] does not match \"model_type\" = "
                "\"llama\"");
  ExpectRefused(Replaced(LlamaJson(), "LlamaForCausalLM", "LlamaForSequenceClassification"),
                "\"architectures\" = [\"LlamaForSequenceClassification\"]");
  ExpectRefused(Replaced(LlamaJson(), "[\"LlamaForCausalLM\"]", "\"LlamaForCausalLM\""),
                "\"architectures\" = \"LlamaForCausalLM\" does not match");
  EXPECT_EQ(
      ParseHfLlamaConfig(Replaced(LlamaJson(), "\"architectures\": [\"LlamaForCausalLM\"],", ""),
                         "m/config.json")
          .hidden,
      64);
}

// GPT-2's config.json as Hugging Face publishes it for the 124 M model (its fields, token ids
// and all), then `extra` fields.
std::string Gpt2Json(const std::string& extra = "") {
  return R"({
  "activation_function": "gelu_new",
  "architectures": ["GPT2LMHeadModel"],
  "attn_pdrop": 0.1,
  "bos_token_id": 50256,
  "embd_pdrop": 0.1,
  "eos_token_id": 50256,
  "initializer_range": 0.02,
  "layer_norm_epsilon": 1e-05,
  "model_type": "gpt2",
  "n_ctx": 1024,
  "n_embd": 768,
  "n_head": 12,
  "n_inner": null,
  "n_layer": 12,
  "n_positions": 1024,
  "reorder_and_upcast_attn": false,
  "resid_pdrop": 0.1,
  "scale_attn_by_inverse_layer_idx": false,
  "scale_attn_weights": true,
  "summary_activation": null,
  "summary_first_dropout": 0.1,
  "summary_proj_to_labels": true,
  "summary_type": "cls_index",
  "summary_use_proj": true,
  "task_specific_params": {"text-generation": {"do_sample": true, "max_length": 50}},
  "transformers_version": "4.26.0",)" +
         extra + R"(
  "use_cache": true,
  "vocab_size": 50257
})";
}

TEST(HfConfigTest, ReadsAGpt2ConfigAsConveyorsGpt) {
  const HfModelConfig c = [] {
    const std::string path = ::testing::TempDir() + "conveyor_gpt2_config.json";
    std::FILE* f = std::fopen(path.c_str(), "w");
    std::fputs(Gpt2Json().c_str(), f);
    std::fclose(f);
    const HfModelConfig read = ReadHfModelConfig(path);
    std::remove(path.c_str());
    return read;
  }();
  EXPECT_EQ(c.type, "gpt2");
  EXPECT_EQ(c.gpt.hidden, 768);
  EXPECT_EQ(c.gpt.heads, 12);
  EXPECT_EQ(c.gpt.layers, 12);
  EXPECT_EQ(c.gpt.max_seq_len, 1024);
  EXPECT_EQ(c.gpt.vocab, 50257);
  EXPECT_TRUE(c.gpt.tie_embeddings);  // GPT-2's default
  EXPECT_TRUE(c.gpt.gelu_tanh);
  // What conveyor writes, it reads back.
  const GptConfig back = ParseHfGpt2Config(HfGpt2ConfigJson(c.gpt, "float32"), "written");
  EXPECT_EQ(back.hidden, 768);
  EXPECT_EQ(back.vocab, 50257);
  EXPECT_TRUE(back.gelu_tanh);
  GptConfig exact = c.gpt;
  exact.gelu_tanh = false;
  EXPECT_FALSE(ParseHfGpt2Config(HfGpt2ConfigJson(exact, "float32"), "written").gelu_tanh);
}

TEST(HfConfigTest, RefusesAGpt2ConveyorWouldComputeDifferently) {
  auto refused = [](const std::string& json, const std::string& what) {
    try {
      ParseHfGpt2Config(json, "config.json");
      ADD_FAILURE() << "accepted: " << what;
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  std::string relu = Gpt2Json();
  relu.replace(relu.find("\"gelu_new\""), 10, "\"relu\"");
  refused(relu, "\"activation_function\" = \"relu\"");
  std::string eps = Gpt2Json();
  eps.replace(eps.find("1e-05"), 5, "1e-06");
  refused(eps, "\"layer_norm_epsilon\"");
  std::string by_layer = Gpt2Json();
  by_layer.replace(by_layer.find("\"scale_attn_by_inverse_layer_idx\": false"), 40,
                   "\"scale_attn_by_inverse_layer_idx\": true");
  refused(by_layer, "\"scale_attn_by_inverse_layer_idx\" = true");
  refused(Gpt2Json(R"( "n_inner": 1000,)"), "\"n_inner\"");
  refused(Gpt2Json(R"( "rotary": true,)"), "field \"rotary\"");
  refused(Replaced(Gpt2Json(), "GPT2LMHeadModel", "LlamaForCausalLM"),
          "config.json: \"architectures\" = [\"LlamaForCausalLM\"] does not match \"model_type\" = "
          "\"gpt2\"");
  EXPECT_EQ(
      ParseHfGpt2Config(Replaced(Gpt2Json(), "GPT2LMHeadModel", "GPT2Model"), "config.json").hidden,
      768);
}

}  // namespace
}  // namespace conveyor
