#include "conveyor/formats/hf_checkpoint.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>

#include "conveyor/common/error.h"
#include "conveyor/common/remove_tree.h"
#include "conveyor/formats/hf_checkpoint_testing.h"
#include "conveyor/formats/safetensors.h"
#include "conveyor/nn/gpt.h"
#include "conveyor/nn/llama.h"

namespace conveyor {
namespace {

namespace fs = std::filesystem;
using Named = std::map<std::string, at::Tensor>;

LlamaConfig SmallLlama() {
  LlamaConfig c;
  c.vocab = 40;
  c.hidden = 16;
  c.intermediate = 24;
  c.heads = 4;
  c.kv_heads = 2;
  c.layers = 2;
  return c;
}

class HfCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "conveyor_hf_" + std::to_string(::getpid());
    RemoveTree(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { RemoveTree(dir_); }

  // A fresh folder of `weights` (WriteHfLlamaFolder).
  void Write(const LlamaConfig& c, const Named& weights, at::ScalarType dtype, bool shards) {
    RemoveTree(dir_);
    fs::create_directories(dir_);
    WriteHfLlamaFolder(dir_, c, weights, dtype, shards);
  }

  void ExpectRefused(std::initializer_list<std::string> parts) {
    try {
      HfCheckpoint checkpoint(dir_);
      ADD_FAILURE() << "opened; expected a refusal naming " << *parts.begin();
    } catch (const UserError& e) {
      for (const std::string& part : parts) {
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
            << "no '" << part << "' in: " << e.what();
      }
    }
  }

  std::string dir_;
};

TEST_F(HfCheckpointTest, ReadsEveryTensorFromOneFileOrShards) {
  const LlamaConfig c = SmallLlama();
  const Named weights = LlamaWeights(c, 3);
  for (const bool shards : {false, true}) {
    for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
      SCOPED_TRACE(std::string(shards ? "shards, " : "one file, ") + c10::toString(dtype));
      Write(c, weights, dtype, shards);
      HfCheckpoint checkpoint(dir_);
      EXPECT_EQ(checkpoint.config().llama.kv_heads, 2);
      EXPECT_EQ(checkpoint.config().llama.layers, 2);
      for (const auto& [name, t] : weights) {
        const at::Tensor got = checkpoint.Read(name);
        EXPECT_EQ(got.scalar_type(), at::kFloat);
        EXPECT_TRUE(at::equal(got, t.to(dtype).to(at::kFloat))) << name;
      }
      EXPECT_EQ(checkpoint.reads(), static_cast<int>(weights.size()));
    }
  }
}

// A tensor-parallel rank's parameters of one layer get their parts, and nothing else is read.
TEST_F(HfCheckpointTest, LoadsARanksShardsReadingOnlyItsTensors) {
  const LlamaConfig c = SmallLlama();
  const Named weights = LlamaWeights(c, 5);
  Write(c, weights, at::kFloat, /*shards=*/true);
  HfCheckpoint checkpoint(dir_);
  const ParameterSpecs specs = ParameterSpecsOf(BuildLlama(c, 5));
  NamedTensors mine;
  for (const char* name :
       {"model.layers.1.self_attn.k_proj.weight", "model.layers.1.self_attn.o_proj.weight",
        "model.layers.1.input_layernorm.weight"}) {
    const TensorParallelSplit split = specs.Of(name).tp;
    mine.emplace_back(name, at::zeros_like(TakeShard(weights.at(name), split, 2, 1)));
  }
  checkpoint.LoadInto(mine, specs, TensorParallel{2, 1, nullptr});
  EXPECT_EQ(checkpoint.reads(), 3);
  for (const auto& [name, p] : mine) {
    EXPECT_TRUE(at::equal(p, TakeShard(weights.at(name), specs.Of(name).tp, 2, 1))) << name;
  }
  // A parameter of another shape is refused before anything is copied.
  NamedTensors wrong = {{"model.norm.weight", at::zeros({3})},
                        {"model.layers.0.input_layernorm.weight", at::zeros({c.hidden})}};
  try {
    checkpoint.LoadInto({wrong[1], wrong[0]}, specs, TensorParallel{});
    ADD_FAILURE() << "loaded a tensor of another shape";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("model.norm.weight"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(at::equal(wrong[1].second, at::zeros({c.hidden})));
}

TEST_F(HfCheckpointTest, RefusesAFolderThatIsNotTheModelOfItsConfig) {
  const LlamaConfig c = SmallLlama();
  Named weights = LlamaWeights(c, 7);
  const std::string q = "model.layers.0.self_attn.q_proj.weight";
  {
    Named missing = weights;
    missing.erase(q);
    Write(c, missing, at::kFloat, false);
    ExpectRefused({"lacks tensor '" + q + "'"});
  }
  {
    Named extra = weights;
    extra["model.layers.0.self_attn.q_proj.bias"] = at::zeros({16});
    Write(c, extra, at::kFloat, false);
    ExpectRefused({"model.safetensors", "q_proj.bias"});
  }
  {
    Named reshaped = weights;
    reshaped[q] = at::zeros({8, 16});
    Write(c, reshaped, at::kFloat, true);
    ExpectRefused({"model-00001-of-00002.safetensors", q, "[8, 16]", "[16, 16]"});
  }
  {
    Write(c, weights, at::kFloat, false);
    Named stored = weights;
    stored[q] = stored[q].to(at::kInt);
    SaveSafetensors(dir_ + "/model.safetensors", stored);
    ExpectRefused({"model.safetensors", q, "stored as I32"});
  }
  LlamaConfig tied = c;
  tied.tie_embeddings = true;
  Write(tied, weights, at::kFloat, false);  // still has lm_head.weight
  ExpectRefused({"lm_head.weight", "tied"});
}

TEST_F(HfCheckpointTest, RefusesABrokenIndexOrATruncatedShard) {
  const LlamaConfig c = SmallLlama();
  Write(c, LlamaWeights(c, 9), at::kBFloat16, true);
  const std::string second = dir_ + "/model-00002-of-00002.safetensors";
  fs::resize_file(second, fs::file_size(second) - 10);
  ExpectRefused({"model-00002-of-00002.safetensors", "truncated file?"});
  fs::remove(second);
  ExpectRefused({"model-00002-of-00002.safetensors", "not in the folder"});
  fs::remove(dir_ + "/model.safetensors.index.json");
  ExpectRefused({"neither model.safetensors nor model.safetensors.index.json"});
}

// A folder with both model.safetensors and an index reads the single file, as transformers'
// from_pretrained does: the index and its shards are not even opened.
TEST_F(HfCheckpointTest, AFolderWithBothReadsTheSingleFileAsTransformersDoes) {
  const LlamaConfig c = SmallLlama();
  Write(c, LlamaWeights(c, 11), at::kFloat, /*shards=*/true);
  const Named single = LlamaWeights(c, 12);
  WriteHfLlamaFolder(dir_, c, single, at::kFloat, /*shards=*/false);
  ASSERT_TRUE(fs::exists(dir_ + "/model.safetensors.index.json"));
  fs::resize_file(dir_ + "/model-00002-of-00002.safetensors", 10);
  HfCheckpoint checkpoint(dir_);
  for (const auto& [name, t] : single) {
    EXPECT_TRUE(at::equal(checkpoint.Read(name), t)) << name;
  }
}

// NaN or infinity in a weight is refused as it is read (whole, as a tensor-parallel part, or
// loaded into a parameter), naming the tensor and its file; a part without it reads.
TEST_F(HfCheckpointTest, RefusesNaNOrInfinityInAWeightItReads) {
  const LlamaConfig c = SmallLlama();
  const std::string down = "model.layers.1.mlp.down_proj.weight";
  for (const float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
      SCOPED_TRACE(std::to_string(bad) + " " + c10::toString(dtype));
      Named weights = LlamaWeights(c, 13);
      weights[down] = weights[down].clone();
      weights[down][2][3] = bad;
      Write(c, weights, dtype, /*shards=*/true);
      HfCheckpoint checkpoint(dir_);
      auto expect_refused = [&](const std::function<void()>& read, const std::string& what) {
        try {
          read();
          ADD_FAILURE() << what << " read a tensor holding " << bad;
        } catch (const UserError& e) {
          for (const std::string& part : {std::string("model-00002-of-00002.safetensors"),
                                          "'" + down + "'", std::string("NaN or infinite")}) {
            EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
                << what << ": no '" << part << "' in: " << e.what();
          }
        }
      };
      expect_refused([&] { checkpoint.Read(down); }, "Read");
      const ParameterSpec spec = RowParallel();  // a down projection's
      ParameterSpecs specs;
      specs.Declare(down, spec);
      for (int rank = 0; rank < 2; ++rank) {
        const TensorParallel tp{2, rank, nullptr};
        if (NonFiniteCount(TakeShard(weights[down], spec.tp, 2, rank)) > 0) {
          expect_refused([&] { checkpoint.ReadShard(down, spec, tp); }, "ReadShard");
          NamedTensors params = {
              {down, at::zeros_like(TakeShard(weights[down], spec.tp, 2, rank))}};
          expect_refused([&] { checkpoint.LoadInto(params, specs, tp); }, "LoadInto");
        } else {
          EXPECT_EQ(NonFiniteCount(checkpoint.ReadShard(down, spec, tp)), 0) << "rank " << rank;
        }
      }
      EXPECT_EQ(NonFiniteCount(checkpoint.Read("model.norm.weight")), 0);
    }
  }
}

// A write killed midway (kill -9) leaves DIR.tmp with its mark; the next write to DIR removes
// it, saying so in one line. A DIR.tmp without the mark (a folder, a file or a link of the
// user's) is refused and left as it was.
TEST_F(HfCheckpointTest, AWriteRemovesTheFolderAKilledWriteLeftAndNothingElse) {
  HfModelConfig config;
  config.type = "llama";
  config.llama = SmallLlama();
  const Named weights = LlamaWeights(config.llama, 15);
  const std::string out = dir_ + "/out", temp = out + ".tmp";
  HfWriteOptions options;
  options.shard_bytes = 3000;  // several files
  auto tensor = [&](const std::string& name) { return weights.at(name); };
  EXPECT_EXIT(
      {
        int reads = 0;
        WriteHfCheckpoint(out, config, options, [&](const std::string& name) {
          if (++reads == 4) std::raise(SIGKILL);
          return weights.at(name);
        });
      },
      ::testing::KilledBySignal(SIGKILL), "");
  ASSERT_TRUE(fs::is_directory(temp));
  EXPECT_TRUE(fs::exists(temp + "/config.json"));
  EXPECT_TRUE(fs::exists(temp + "/.conveyor-unfinished-export"));
  EXPECT_FALSE(fs::exists(out));
  ::testing::internal::CaptureStderr();
  WriteHfCheckpoint(out, config, options, tensor);
  EXPECT_EQ(
      ::testing::internal::GetCapturedStderr(),
      "conveyor: removed " + temp + ", left by an export to " + out + " that did not finish\n");
  EXPECT_FALSE(fs::exists(temp));
  HfCheckpoint written(out);
  for (const auto& [name, t] : weights) EXPECT_TRUE(at::equal(written.Read(name), t)) << name;
  EXPECT_FALSE(fs::exists(out + "/.conveyor-unfinished-export"));
  // Not a killed write's: refused, left alone.
  const std::string other = dir_ + "/other", mine = other + ".tmp";
  auto expect_left_alone = [&](const std::string& kind) {
    try {
      WriteHfCheckpoint(other, config, options, tensor);
      ADD_FAILURE() << "wrote over " << kind;
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(mine + " exists and is not a folder left by an "
                                                  "unfinished export"),
                std::string::npos)
          << e.what();
    }
    EXPECT_TRUE(fs::exists(fs::symlink_status(mine))) << kind;
    EXPECT_FALSE(fs::exists(other)) << kind;
  };
  fs::create_directories(mine);
  std::ofstream(mine + "/config.json") << "{}";
  expect_left_alone("a folder without the mark");
  EXPECT_TRUE(fs::exists(mine + "/config.json"));
  RemoveTree(mine);
  std::ofstream(mine) << "notes";
  expect_left_alone("a file");
  fs::remove(mine);
  fs::create_directories(dir_ + "/killed");
  std::ofstream(dir_ + "/killed/.conveyor-unfinished-export");
  fs::create_directory_symlink(dir_ + "/killed", mine);
  expect_left_alone("a link to a folder with the mark");
  EXPECT_TRUE(fs::exists(dir_ + "/killed/.conveyor-unfinished-export"));
}

// A GPT-2 saved without the "transformer." prefix (as GPT2Model saves it) and holding the
// attention-mask buffers of older files opens, and reads as the one conveyor wrote; another
// unexpected tensor is still refused.
TEST_F(HfCheckpointTest, AGpt2WithoutPrefixOrWithMaskBuffersOpens) {
  HfModelConfig config;
  config.type = "gpt2";
  config.gpt.hidden = 16;
  config.gpt.heads = 2;
  config.gpt.layers = 2;
  config.gpt.max_seq_len = 8;
  config.gpt.vocab = 30;
  config.gpt.tie_embeddings = true;
  std::map<std::string, at::Tensor> weights;
  for (const ParameterShapes& layer : GptLayerShapes(config.gpt)) {
    for (const auto& [name, shape] : layer) weights[name] = at::randn(shape);
  }
  RemoveTree(dir_);
  WriteHfCheckpoint(dir_, config, {}, [&](const std::string& name) { return weights.at(name); });
  std::map<std::string, at::Tensor> bare;
  for (auto& [name, t] : LoadSafetensors(dir_ + "/model.safetensors").tensors) {
    ASSERT_EQ(name.rfind("transformer.", 0), 0u) << name;
    bare[name.substr(12)] = t;
  }
  bare["h.0.attn.bias"] = at::ones({1, 1, 8, 8});
  bare["h.1.attn.masked_bias"] = at::full({}, -1e4);
  SaveSafetensors(dir_ + "/model.safetensors", bare);
  HfCheckpoint checkpoint(dir_);
  for (const auto& [name, t] : weights) EXPECT_TRUE(at::equal(checkpoint.Read(name), t)) << name;
  bare["h.0.attn.extra"] = at::ones({2});
  SaveSafetensors(dir_ + "/model.safetensors", bare);
  ExpectRefused({"h.0.attn.extra", "does not have"});
}

// The names a GPT-2 folder gets come from the specs the GPT's layers declare: every parameter
// declares one, and together they are exactly the tensors transformers' GPT2LMHeadModel
// saves (listed here by hand from its state_dict), tied or not.
TEST_F(HfCheckpointTest, TheDeclaredNamesAreTheTensorsOfAGpt2Folder) {
  for (const bool tied : {true, false}) {
    HfModelConfig config;
    config.type = "gpt2";
    config.gpt.hidden = 8;
    config.gpt.heads = 2;
    config.gpt.layers = 2;
    config.gpt.max_seq_len = 4;
    config.gpt.vocab = 10;
    config.gpt.tie_embeddings = tied;
    std::set<std::string> expected = {"transformer.wte.weight", "transformer.wpe.weight",
                                      "transformer.ln_f.weight", "transformer.ln_f.bias"};
    if (!tied) expected.insert("lm_head.weight");
    for (const std::string i : {"0", "1"}) {
      for (const char* name :
           {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
            "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight",
            "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"}) {
        expected.insert("transformer.h." + i + "." + name);
      }
    }
    std::set<std::string> named;
    for (const HfTensor& t : HfTensors(config)) {
      EXPECT_TRUE(named.insert(t.name).second) << t.name << " twice";
      // Conv1D weights are stored (in, out): c_attn's is (C, 3C).
      if (t.name == "transformer.h.0.attn.c_attn.weight") {
        EXPECT_TRUE(t.transposed);
        EXPECT_EQ(t.shape, (std::vector<int64_t>{8, 24}));
      }
    }
    EXPECT_EQ(named, expected) << "tied " << tied;
    for (const std::shared_ptr<Layer>& layer : BuildGpt(config.gpt, 1)) {
      for (const auto& [param, tensor] : layer->NamedParameters()) {
        EXPECT_FALSE(layer->parameter_specs().Of(param).hf.name.empty())
            << param << " declares no Hugging Face name";
      }
    }
  }
}

}  // namespace
}  // namespace conveyor
