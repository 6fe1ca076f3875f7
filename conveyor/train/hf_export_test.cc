#include "conveyor/train/hf_export.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "conveyor/common/atomic_file.h"
#include "conveyor/common/error.h"
#include "conveyor/common/remove_tree.h"
#include "conveyor/formats/hf_checkpoint_testing.h"
#include "conveyor/formats/safetensors.h"
#include "conveyor/nn/gpt.h"
#include "conveyor/nn/hf_config.h"
#include "conveyor/nn/tensor_parallel.h"
#include "conveyor/train/builtin_tasks.h"
#include "conveyor/train/checkpoint.h"
#include "conveyor/train/gpt_architecture.h"
#include "conveyor/train/llama_architecture.h"
#include "conveyor/train/train_testing.h"

namespace conveyor {
namespace {

namespace fs = std::filesystem;

class HfExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    at::set_num_threads(1);
    dir_ = ::testing::TempDir() + "conveyor_hf_export_" + std::to_string(::getpid());
    RemoveTree(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { RemoveTree(dir_); }

  // Trains `c` on threads to step `steps` (0: none) and saves a checkpoint there; returns its
  // folder.
  std::string Checkpoint(const TrainConfig& c, int steps, const std::string& name) {
    const std::string ckpt = dir_ + "/" + name;
    TrainOnThreads(
        c, [&](Trainer& t, Transport& w) { SaveCheckpoint(ckpt, t, c, &w); },
        steps > 0 ? steps : -1);
    return ckpt;
  }

  // Every tensor of a Hugging Face folder, by name, in its stored dtype.
  static std::map<std::string, at::Tensor> Tensors(const std::string& folder) {
    std::map<std::string, at::Tensor> all;
    for (const auto& entry : fs::directory_iterator(folder)) {
      if (entry.path().extension() != ".safetensors") continue;
      for (auto& [name, t] : LoadSafetensors(entry.path().string()).tensors) all[name] = t;
    }
    return all;
  }

  std::string dir_;
};

// A folder imported (bf16, sharded), saved untrained and exported as bf16 holds the same
// bytes under the same names; the export is a folder conveyor opens, in files of at most the
// shard size.
TEST_F(HfExportTest, ImportThenExportIsBitIdentical) {
  TrainConfig c = TinyLlama();
  c.model.tie_embeddings = true;
  const LlamaConfig llama = LlamaConfigOf(c.model);
  const std::string in = dir_ + "/in";
  fs::create_directories(in);
  WriteHfLlamaFolder(in, llama, LlamaWeights(llama, 17), at::kBFloat16, /*shards=*/true);
  SetModel(c, in, "--model");
  ApplyModelFolder(c);
  c.pp = 2;
  c.schedule = "1f1b";
  const std::string ckpt = Checkpoint(c, 0, "ckpt");
  const std::string out = dir_ + "/out";
  HfWriteOptions options;
  options.dtype = at::kBFloat16;
  options.shard_bytes = 20000;  // several files
  const std::vector<std::string> files = ExportHfCheckpoint(ckpt, out, options);
  ASSERT_GT(files.size(), 2u);
  EXPECT_TRUE(fs::exists(out + "/model.safetensors.index.json"));
  for (const std::string& file : files) {
    int64_t bytes = 0;
    for (const auto& [name, t] : LoadSafetensors(out + "/" + file).tensors) bytes += t.nbytes();
    EXPECT_TRUE(bytes <= options.shard_bytes ||
                LoadSafetensors(out + "/" + file).tensors.size() == 1)
        << file << " holds " << bytes << " bytes";
  }
  const std::map<std::string, at::Tensor> before = Tensors(in), after = Tensors(out);
  ASSERT_EQ(before.size(), after.size());
  for (const auto& [name, t] : before) {
    ASSERT_TRUE(after.count(name)) << name;
    EXPECT_EQ(after.at(name).scalar_type(), at::kBFloat16) << name;
    EXPECT_TRUE(at::equal(after.at(name), t)) << name;
  }
  HfCheckpoint reopened(out);  // every check of an import passes
  EXPECT_EQ(reopened.config().llama.layers, llama.layers);
  EXPECT_TRUE(reopened.config().llama.tie_embeddings);
  EXPECT_FALSE(fs::exists(out + ".tmp"));
}

// A Mixtral, a Qwen2-MoE, a Qwen3-MoE and an OLMoE folder, imported, saved untrained (pp 2)
// and exported, hold the same bytes under the same names (every expert) and the same config.
TEST_F(HfExportTest, MixtureOfExpertsFoldersExportBitIdentically) {
  for (const std::string type : {"mixtral", "qwen2_moe", "qwen3_moe", "olmoe"}) {
    SCOPED_TRACE(type);
    const bool mixtral = type == "mixtral", qwen = type == "qwen3_moe";
    const bool qwen2 = type == "qwen2_moe";
    TrainConfig c = TinyLlama();
    c.model.experts = 4;
    c.model.top_k = 2;
    c.model.intermediate = 40;
    c.model.expert_units = qwen || qwen2 ? 24 : 40;
    c.model.moe_mixtral_names = mixtral;
    c.model.qk_norm = mixtral || qwen2 ? "" : qwen ? "head" : "projection";
    if (qwen2) {  // a gated shared expert, biases on the q, k and v projections
      c.model.shared_expert_units = 16;
      c.model.shared_expert_gate = true;
      c.model.qkv_bias = true;
    }
    if (qwen || qwen2) c.model.moe_dense_layers = {1};
    const LlamaConfig llama = LlamaConfigOf(c.model);
    const std::string in = dir_ + "/" + type;
    fs::create_directories(in);
    WriteHfLlamaFolder(in, llama, LlamaWeights(llama, 17), at::kFloat, /*shards=*/false);
    TrainConfig from_folder = TinyLlama();
    SetModel(from_folder, in, "--model");
    ApplyModelFolder(from_folder);
    EXPECT_EQ(from_folder.model.experts, 4);
    EXPECT_EQ(from_folder.model.qk_norm, c.model.qk_norm);
    EXPECT_EQ(from_folder.model.qkv_bias, c.model.qkv_bias);
    EXPECT_EQ(from_folder.model.shared_expert_units, c.model.shared_expert_units);
    from_folder.pp = 2;
    from_folder.schedule = "1f1b";
    const std::string ckpt = Checkpoint(from_folder, 0, "ckpt_" + type);
    const std::string out = in + "_out";
    ExportHfCheckpoint(ckpt, out, {});
    const std::map<std::string, at::Tensor> before = Tensors(in), after = Tensors(out);
    ASSERT_EQ(before.size(), after.size());
    for (const auto& [name, t] : before) {
      ASSERT_TRUE(after.count(name)) << name;
      EXPECT_TRUE(at::equal(after.at(name), t)) << name;
    }
    EXPECT_EQ(ReadHfModelConfig(out + "/config.json").type, type);
  }
}

// Trained on a dp 2 x tp 2 x pp 2 mesh or on one rank, the exports are the same model; the
// export of a trained checkpoint, imported again, holds exactly the checkpoint's weights.
// (A padded vocabulary's export: AGptIsWrittenAsAGpt2AndReadBack.)
TEST_F(HfExportTest, AMeshRunExportsAsOneRankDoes) {
  TrainConfig c = TinyLlama();
  const std::string one = Checkpoint(c, 3, "one");
  TrainConfig mesh = c;
  mesh.dp = 2;
  mesh.tp = 2;
  mesh.pp = 2;
  mesh.schedule = "1f1b";
  const std::string many = Checkpoint(mesh, 3, "many");
  ExportHfCheckpoint(one, dir_ + "/one_hf", {});
  ExportHfCheckpoint(many, dir_ + "/many_hf", {});
  const std::map<std::string, at::Tensor> a = Tensors(dir_ + "/one_hf");
  const std::map<std::string, at::Tensor> b = Tensors(dir_ + "/many_hf");
  ASSERT_EQ(a.size(), b.size());
  // Sums in another order: AdamW turns a gradient near zero's rounding into up to ~1e-5 of
  // an lr of 3e-3 over three steps.
  for (const auto& [name, t] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    EXPECT_TRUE(at::allclose(b.at(name), t, 1e-4, 2e-5))
        << name << " differs by " << (b.at(name) - t).abs().max().item<double>();
  }
  // The export read back: the checkpoint's own weights, bit for bit.
  CheckpointWeights saved(many);
  HfCheckpoint exported(dir_ + "/many_hf");
  for (const auto& [name, t] : b) {
    EXPECT_TRUE(at::equal(exported.Read(name), saved.Read(name))) << name;
  }
  // A run started from the exported folder starts from the checkpoint's weights.
  TrainConfig from = c;
  SetModel(from, dir_ + "/many_hf", "--model");
  ApplyModelFolder(from);
  Trainer trainer(from, MakeTask(from), InProcessRank(nullptr, from.device));
  for (const auto& [name, p] : trainer.model().Parameters()) {
    EXPECT_TRUE(at::equal(p, saved.Read(name))) << name;
  }
}

// A GPT trained on tp 2 x pp 2 is written as a GPT-2 (Conv1D weights transposed, its
// names), which conveyor reads back as the checkpoint's weights, whole and as TP shards (the
// odd vocabulary's tables padded on rank 1).
TEST_F(HfExportTest, AGptIsWrittenAsAGpt2AndReadBack) {
  TrainConfig c = TinyGpt();
  c.model.vocab = 301;
  c.model.gelu_tanh = true;
  c.tp = 2;
  c.pp = 2;
  c.schedule = "1f1b";
  const std::string ckpt = Checkpoint(c, 2, "gpt");
  ExportHfCheckpoint(ckpt, dir_ + "/gpt_hf", {});
  CheckpointWeights saved(ckpt);
  const std::map<std::string, at::Tensor> stored = Tensors(dir_ + "/gpt_hf");
  ASSERT_TRUE(stored.count("transformer.h.0.attn.c_attn.weight"));
  EXPECT_TRUE(at::equal(stored.at("transformer.h.0.attn.c_attn.weight"),
                        saved.Read("blocks.0.attn.qkv.weight").t()));
  EXPECT_TRUE(stored.count("transformer.wpe.weight"));
  EXPECT_EQ(stored.at("transformer.wte.weight").size(0), 301);
  EXPECT_TRUE(stored.count("lm_head.weight"));  // untied
  HfCheckpoint exported(dir_ + "/gpt_hf");
  EXPECT_EQ(exported.config().type, "gpt2");
  EXPECT_TRUE(exported.config().gpt.gelu_tanh);
  const ParameterSpecs specs = ParameterSpecsOf(BuildGpt(GptConfigOf(c.model), c.seed));
  for (const ParameterShapes& layer : GptLayerShapes(GptConfigOf(c.model))) {
    for (const auto& [name, shape] : layer) {
      const at::Tensor whole = saved.Read(name);
      EXPECT_TRUE(at::equal(exported.Read(name), whole)) << name;
      for (int rank = 0; rank < 2; ++rank) {
        TensorParallel tp;
        tp.size = 2;
        tp.rank = rank;
        EXPECT_TRUE(at::equal(exported.ReadShard(name, specs.Of(name), tp),
                              TakeShard(whole, specs.Of(name).tp, 2, rank)))
            << name << " rank " << rank;
      }
    }
  }
}

TEST_F(HfExportTest, RefusesWhatItCannotWrite) {
  const std::string llama = Checkpoint(TinyLlama(), 1, "llama");
  fs::create_directories(dir_ + "/full");
  WriteFileAtomically(dir_ + "/full/README", "mine");
  EXPECT_THROW(ExportHfCheckpoint(llama, dir_ + "/full", {}), UserError);
  EXPECT_TRUE(fs::exists(dir_ + "/full/README"));
  HfWriteOptions int_weights;
  int_weights.dtype = at::kInt;
  EXPECT_THROW(ExportHfCheckpoint(llama, dir_ + "/ints", int_weights), UserError);
  EXPECT_FALSE(fs::exists(dir_ + "/ints"));
}

}  // namespace
}  // namespace conveyor
