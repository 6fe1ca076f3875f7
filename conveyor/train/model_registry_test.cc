#include "conveyor/train/model_registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "conveyor/common/error.h"
#include "conveyor/common/scratch_folder_testing.h"
#include "conveyor/nn/hf_config.h"
#include "conveyor/train/train_config.h"

namespace conveyor {
namespace {

std::set<std::string> KeysOf(const nlohmann::json& object) {
  std::set<std::string> keys;
  for (const auto& [key, value] : object.items()) keys.insert(key);
  return keys;
}

const std::set<std::string> kSharedKeys = {"model",   "layers",         "hidden", "heads",
                                           "seq_len", "tie_embeddings", "classes"};

// A GPT-2 with a vocabulary and positions of its own, every field that applies set.
ModelSpec Gpt2() {
  ModelSpec spec;
  spec.layers = 3;
  spec.hidden = 48;
  spec.heads = 6;
  spec.seq_len = 32;
  spec.tie_embeddings = true;
  spec.vocab = 300;
  spec.positions = 64;
  spec.gelu_tanh = true;
  return spec;
}

// A Llama with every field that applies set.
ModelSpec Llama() {
  ModelSpec spec;
  spec.kind = ModelKind::kLlama;
  spec.layers = 3;
  spec.hidden = 48;
  spec.heads = 6;
  spec.kv_heads = 2;
  spec.intermediate = 96;
  spec.seq_len = 32;
  spec.rope_theta = 500000;
  spec.rms_norm_eps = 1e-6;
  spec.tie_embeddings = true;
  spec.vocab = 320;
  return spec;
}

TEST(ModelRegistryTest, DerivesEachArchitecturesSizes) {
  ModelSpec llama;
  llama.kind = ModelKind::kLlama;
  llama.hidden = 4096;
  llama.heads = 32;
  TransformerSpec sizes = ModelSizes(llama);
  EXPECT_EQ(sizes.kv_heads, 32);  // no grouping
  EXPECT_EQ(sizes.intermediate, GatedMlpUnits(4096));
  EXPECT_EQ(sizes.intermediate, 10928);  // what plan --auto prices for the same flags
  EXPECT_EQ(sizes.vocab, 256);
  EXPECT_TRUE(sizes.gated_mlp);
  sizes = ModelSizes(Llama());
  EXPECT_EQ(sizes.kv_heads, 2);
  EXPECT_EQ(sizes.intermediate, 96);
  EXPECT_EQ(sizes.vocab, 320);

  ModelSpec gpt;
  gpt.kv_heads = 2;  // a Llama's field: a GPT has none
  gpt.intermediate = 96;
  sizes = ModelSizes(gpt);
  EXPECT_EQ(sizes.kv_heads, 4);
  EXPECT_EQ(sizes.intermediate, 4 * 64);
  EXPECT_EQ(sizes.vocab, 256);
  EXPECT_FALSE(sizes.gated_mlp);
  EXPECT_EQ(ModelSizes(Gpt2()).vocab, 300);

  ModelSpec classifier = Gpt2();
  classifier.kind = ModelKind::kClassifier;
  EXPECT_EQ(ModelSizes(classifier).vocab, 256);  // bytes, whatever vocab says

  EXPECT_TRUE(IsLanguageModel(ModelKind::kGpt));
  EXPECT_TRUE(IsLanguageModel(ModelKind::kLlama));
  EXPECT_FALSE(IsLanguageModel(ModelKind::kClassifier));
}

// What a checkpoint records of each architecture reads back as the same model, under the
// keys checkpoints have always had.
TEST(ModelRegistryTest, EachArchitectureRoundTripsThroughACheckpointsRecord) {
  ModelSpec gpt;
  gpt.layers = 3;
  ModelSpec classifier;
  classifier.kind = ModelKind::kClassifier;
  classifier.classes = 7;
  std::set<std::string> gpt2_keys = kSharedKeys;
  gpt2_keys.insert({"vocab", "positions", "gelu_tanh"});
  std::set<std::string> llama_keys = kSharedKeys;
  llama_keys.insert({"kv_heads", "intermediate", "rope_theta", "vocab", "rms_norm_eps"});
  const struct {
    ModelSpec spec;
    std::set<std::string> keys;
  } cases[] = {
      {gpt, kSharedKeys}, {Gpt2(), gpt2_keys}, {Llama(), llama_keys}, {classifier, kSharedKeys}};
  for (const auto& [spec, keys] : cases) {
    const std::string what(ModelKindName(spec.kind));
    const nlohmann::json record = ModelSpecJson(spec);
    EXPECT_EQ(KeysOf(record), keys) << what;
    EXPECT_EQ(record.at("model"), what);
    EXPECT_EQ(ModelSpecFromJson(record, "checkpoint"), spec) << what << ": " << record.dump();
  }
  // A Llama's defaults are recorded resolved: a later change of a default cannot change
  // what an old checkpoint holds.
  ModelSpec llama;
  llama.kind = ModelKind::kLlama;
  const nlohmann::json record = ModelSpecJson(llama);
  EXPECT_EQ(record.at("kv_heads"), 4);
  EXPECT_EQ(record.at("intermediate"), GatedMlpUnits(64));
  EXPECT_EQ(record.at("vocab"), 256);
  const TransformerSpec read = ModelSizes(ModelSpecFromJson(record, "checkpoint"));
  EXPECT_EQ(read.kv_heads, 4);
  EXPECT_EQ(read.intermediate, GatedMlpUnits(64));
  EXPECT_EQ(read.vocab, 256);
  // A Llama's record without its fields is incomplete; a byte-level GPT's older record is not.
  nlohmann::json incomplete = record;
  incomplete.erase("kv_heads");
  EXPECT_THROW(ModelSpecFromJson(incomplete, "checkpoint"), nlohmann::json::exception);
  EXPECT_THROW(ModelSpecFromJson(nlohmann::json{{"model", "mixtral"}}, "checkpoint: model"),
               UserError);
}

// A language model's Hugging Face config.json reads back as the model it was written for,
// at the folder's whole context.
TEST(ModelRegistryTest, EachLanguageModelRoundTripsThroughAHuggingFaceConfig) {
  for (const ModelSpec& spec : {Gpt2(), Llama()}) {
    const std::string what(ModelKindName(spec.kind));
    const ScratchFolder folder;
    const HfModelConfig hf = ArchitectureOf(spec.kind).HfConfig(spec);
    EXPECT_EQ(HfModelKind(hf), spec.kind) << what;
    folder.Write("config.json", HfModelConfigJson(hf, "float32"));
    ModelSpec want = spec;
    want.model_dir = folder.path();
    want.seq_len = std::max(spec.seq_len, spec.positions);  // the folder's positions
    EXPECT_EQ(ModelFolderSpec(folder.path()), want) << what;
  }
}

}  // namespace
}  // namespace conveyor
