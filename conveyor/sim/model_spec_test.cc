#include "conveyor/sim/model_spec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <string>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

TEST(ModelSpecTest, DefaultsAreTheFirstRunsByteLevelGpt) {
  const ModelSpec spec;
  EXPECT_EQ(spec.kind, ModelKind::kGpt);
  EXPECT_EQ(spec.layers, 4);
  EXPECT_EQ(spec.hidden, 64);
  EXPECT_EQ(spec.heads, 4);
  EXPECT_EQ(spec.seq_len, 64);
  EXPECT_EQ(spec.classes, 4);
  EXPECT_EQ(spec.kv_heads, 0);      // heads
  EXPECT_EQ(spec.intermediate, 0);  // the architecture's rule
  EXPECT_EQ(spec.vocab, 0);         // the byte tokenizer's
  EXPECT_EQ(spec.positions, 0);     // seq_len
  EXPECT_DOUBLE_EQ(spec.rope_theta, 10000);
  EXPECT_DOUBLE_EQ(spec.rms_norm_eps, 1e-5);
  EXPECT_FALSE(spec.tie_embeddings);
  EXPECT_FALSE(spec.gelu_tanh);
  EXPECT_TRUE(spec.model_dir.empty());
}

TEST(ModelSpecTest, KindsAreSpelledOnce) {
  for (const ModelKind kind : {ModelKind::kGpt, ModelKind::kClassifier, ModelKind::kLlama}) {
    EXPECT_EQ(ParseModelKind(ModelKindName(kind), "--model"), kind);
    EXPECT_TRUE(IsModelKindName(ModelKindName(kind)));
  }
  EXPECT_FALSE(IsModelKindName("GPT"));
  try {
    ParseModelKind("mixtral", "--model");
    FAIL() << "an unknown kind was read";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("--model"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("mixtral"), std::string::npos) << e.what();
  }
}

// Every field has one range, and the setters check it and name the setting as told.
TEST(ModelSpecTest, SettersCheckTheFieldsRange) {
  ModelSpec spec;
  std::set<std::string> keys;
  ForEachModelInteger(spec, [&](std::string_view key, int& field, int64_t lo, int64_t hi) {
    EXPECT_TRUE(keys.insert(std::string(key)).second) << key;
    EXPECT_LE(lo, field) << key;  // the defaults are within range
    EXPECT_LE(field, hi) << key;
  });
  EXPECT_EQ(keys, (std::set<std::string>{"layers", "hidden", "heads", "seq_len", "classes",
                                         "kv_heads", "intermediate", "experts", "top_k",
                                         "expert_units", "shared_expert_units", "moe_first_dense",
                                         "moe_sparse_step", "lora_rank"}));
  SetModelInteger(spec, "kv_heads", 2, "--kv-heads");
  EXPECT_EQ(spec.kv_heads, 2);
  try {
    SetModelInteger(spec, "hidden", int64_t{1} << 33, "config.json: hidden_size");
    FAIL() << "a hidden size past its range was taken";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()),
              "config.json: hidden_size must be within [1, 65536], got 8589934592");
  }
  EXPECT_EQ(spec.hidden, 64);
  SetModelReal(spec, "rope_theta", 500000, "--rope-theta");
  EXPECT_DOUBLE_EQ(spec.rope_theta, 500000);
  EXPECT_THROW(SetModelReal(spec, "rope_theta", 0, "--rope-theta"), UserError);  // (0, hi]
  EXPECT_THROW(SetModelReal(spec, "rope_theta", std::nan(""), "--rope-theta"), UserError);
  EXPECT_THROW(SetModelInteger(spec, "steps", 1, "--steps"), InternalError);  // not a model field
}

}  // namespace
}  // namespace conveyor
