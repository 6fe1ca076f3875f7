#include "conveyor/train/lora_export.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "conveyor/common/error.h"
#include "conveyor/common/scratch_folder_testing.h"
#include "conveyor/formats/safetensors.h"
#include "conveyor/nn/lora.h"
#include "conveyor/train/checkpoint.h"
#include "conveyor/train/forward_pipeline.h"
#include "conveyor/train/hf_export.h"
#include "conveyor/train/hf_reference_testing.h"
#include "conveyor/train/train_testing.h"

namespace conveyor {
namespace {

class LoraExportTest : public ::testing::Test {
 protected:
  void SetUp() override { at::set_num_threads(1); }

  // TinyLlama with adapters on q_proj, v_proj and down_proj (column and row parallel), trained
  // 2 steps on one rank and saved into "ckpt"; `logits` its logits of `ids`.
  std::string TrainedCheckpoint(const at::Tensor& ids, at::Tensor& logits) {
    TrainConfig c = TinyLlama();
    c.model.lora_rank = 4;
    c.model.lora_alpha = 8;
    c.model.lora_targets = "q_proj,v_proj,down_proj";
    c.lr = 1e-2;
    c.pp = 1;
    const std::string ckpt = scratch_.Path("ckpt");
    TrainOnThreads(
        c,
        [&](Trainer& t, Transport& world) {
          SaveCheckpoint(ckpt, t, c, &world);
          ForwardPipeline forward(t.model());
          const Executor::Inference result =
              forward.Run(SplitBatch(Batch{ids, at::roll(ids, -1, 1), {}}, 1));
          logits = result.outputs.at(0).to(at::kFloat);
        },
        2);
    return ckpt;
  }

  ScratchFolder scratch_;
};

// The plain export of a LoRA checkpoint is the merged model (W + alpha / r B A): a Llama folder
// whose logits are those of the trained base plus adapters.
TEST_F(LoraExportTest, TheMergedExportGivesTheLogitsOfBasePlusAdapters) {
  const at::Tensor ids = at::randint(0, 256, {2, 16}, at::kLong);
  at::Tensor want;
  const std::string ckpt = TrainedCheckpoint(ids, want);
  const std::string merged = scratch_.Path("merged");
  ExportHfCheckpoint(ckpt, merged, HfWriteOptions{});
  for (const auto& [name, t] : LoadSafetensors(merged + "/model.safetensors").tensors) {
    EXPECT_FALSE(IsLoraParameter(name)) << name;
  }
  TrainConfig folder = TinyLlama();
  SetModel(folder, merged, "--model");
  ApplyModelFolder(folder);
  EXPECT_EQ(folder.model.lora_rank, 0);
  const at::Tensor got = LogitsOnOneRank(folder, ids);
  ASSERT_EQ(got.sizes(), want.sizes());
  const double scale = want.abs().max().item<double>();
  EXPECT_TRUE(at::allclose(got, want, 1e-5, 1e-5 * scale))
      << "differ by " << (got - want).abs().max().item<double>() << " of " << scale;
  // The base alone (the adapters dropped) computes otherwise: the merge mattered.
  CheckpointWeights weights(ckpt);
  const std::string q = "model.layers.0.self_attn.q_proj.weight";
  EXPECT_GT((LoadSafetensors(merged + "/model.safetensors").tensors.at(q) - weights.Read(q))
                .abs()
                .max()
                .item<double>(),
            0);
}

// --lora writes PEFT's layout: adapter_config.json (LORA, r, lora_alpha, the targets, the
// base) and every adapter whole under PEFT's names, as trained.
TEST_F(LoraExportTest, TheAdapterExportIsPeftsLayout) {
  at::Tensor logits;
  const std::string ckpt = TrainedCheckpoint(at::randint(0, 256, {1, 16}, at::kLong), logits);
  const std::string out = scratch_.Path("adapter");
  EXPECT_EQ(ExportLoraAdapter(ckpt, out, at::kFloat), 3 * TinyLlama().model.layers);
  std::ifstream file(out + "/adapter_config.json");
  const nlohmann::json config = nlohmann::json::parse(file);
  EXPECT_EQ(config.at("peft_type"), "LORA");
  EXPECT_EQ(config.at("r"), 4);
  EXPECT_EQ(config.at("lora_alpha"), 8.0);
  EXPECT_EQ(config.at("target_modules"),
            (std::vector<std::string>{"q_proj", "v_proj", "down_proj"}));
  EXPECT_EQ(config.at("base_model_name_or_path"), "");
  const std::map<std::string, at::Tensor> tensors =
      LoadSafetensors(out + "/adapter_model.safetensors").tensors;
  EXPECT_EQ(tensors.size(), 2u * 3 * TinyLlama().model.layers);
  CheckpointWeights weights(ckpt);
  for (const std::string name : {"model.layers.1.self_attn.v_proj.lora_B.weight",
                                 "model.layers.0.mlp.down_proj.lora_A.weight"}) {
    const std::string peft = "base_model.model." + name;
    ASSERT_TRUE(tensors.count(peft)) << peft;
    EXPECT_TRUE(at::equal(tensors.at(peft), weights.Read(name))) << name;
  }
  EXPECT_EQ(tensors.at("base_model.model.model.layers.1.self_attn.v_proj.lora_B.weight").sizes(),
            at::IntArrayRef({16, 4}));
  // Into a folder that holds something, or from a checkpoint without adapters: refused.
  EXPECT_THROW(ExportLoraAdapter(ckpt, out, at::kFloat), UserError);
}

TEST_F(LoraExportTest, ACheckpointWithoutAdaptersIsRefused) {
  TrainConfig c = TinyLlama();
  c.pp = 1;
  const std::string ckpt = scratch_.Path("plain");
  TrainOnThreads(
      c, [&](Trainer& t, Transport& world) { SaveCheckpoint(ckpt, t, c, &world); }, 1);
  try {
    ExportLoraAdapter(ckpt, scratch_.Path("none"), at::kFloat);
    ADD_FAILURE() << "exported adapters of a checkpoint without any";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("holds no LoRA adapters"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace conveyor
