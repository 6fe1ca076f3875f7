// conveyor against Hugging Face transformers itself (the reference environment's; the models
// made and run by testdata/reference/transformers_models.py): the folders transformers'
// save_pretrained writes (a Llama with grouped-query attention, a GPT-2, a Mixtral, a
// Qwen3-MoE with per-head query and key norms and dense layers among its sparse ones, a
// Qwen2-MoE with projection biases and a gated shared expert) load in conveyor and give
// transformers' logits on one rank and its loss on every mesh; conveyor's exports of those
// models after training (sharded fp32, bf16) load in transformers and give conveyor's loss;
// greedy generation gives transformers' tokens, one for one; LoRA adapters trained on the
// Llama and exported in PEFT's layout load in peft and give conveyor's logits.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "conveyor/common/reference_env_testing.h"
#include "conveyor/common/scratch_folder_testing.h"
#include "conveyor/formats/hf_checkpoint.h"
#include "conveyor/formats/safetensors.h"
#include "conveyor/train/checkpoint.h"
#include "conveyor/train/evaluate.h"
#include "conveyor/train/forward_pipeline.h"
#include "conveyor/train/generate.h"
#include "conveyor/train/hf_export.h"
#include "conveyor/train/hf_reference_testing.h"
#include "conveyor/train/lora_export.h"
#include "conveyor/train/train_testing.h"

namespace conveyor {
namespace {

namespace fs = std::filesystem;

// The architectures transformers_models.py makes.
const std::vector<std::string> kArchitectures = {"llama", "gpt2", "mixtral", "qwen3_moe",
                                                 "qwen2_moe"};

// Tokens generated after the prompt: prompt and continuation fit the sequence length (16), so
// conveyor's window never slides (transformers' never does).
constexpr int kNewTokens = 10;

// Runs transformers_models.py with `args` (commands joined by "+"); its output on failure.
::testing::AssertionResult RunTransformers(const std::string& args) {
  const ReferenceRun run = RunReferenceScript("transformers_models.py", args);
  if (run.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "transformers_models.py " << args << " exited " << run.status << ":\n"
         << run.output;
}

// One tensor of a safetensors file.
at::Tensor TensorIn(const std::string& path, const std::string& name) {
  return LoadSafetensors(path).tensors.at(name);
}

// The folder `dir`'s model as a run configuration: TinyGpt's or TinyLlama's run (batch,
// sequence length 16, byte corpus) with the folder's architecture (SetModel,
// ApplyModelFolder).
TrainConfig FromFolder(const std::string& dir, bool gpt2) {
  TrainConfig c = gpt2 ? TinyGpt() : TinyLlama();
  SetModel(c, dir, "--model");
  ApplyModelFolder(c);
  return c;
}

// The models transformers made, and what it computed with them, once for every test.
class TransformersCheckTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (ReferencePython().empty()) return;
    at::set_num_threads(1);
    scratch_ = new ScratchFolder();
    at::manual_seed(11);
    // 8 rows of 17 tokens: inputs of 16 (the runs' sequence length) and their targets.
    SaveSafetensors(Path("ids.safetensors"), {{"ids", at::randint(0, 256, {8, 17}, at::kLong)}});
    SaveSafetensors(Path("prompt.safetensors"),
                    {{"ids", at::randint(0, 256, {1, 16 - kNewTokens}, at::kLong)}});
    std::string args;
    for (const std::string& arch : kArchitectures) {
      const std::string dir = Path(arch);
      args += (args.empty() ? "" : " + ") + ("make " + arch + " " + dir + " 5") + " + logits " +
              dir + " " + Path("ids.safetensors") + " " + Path(arch + ".logits") + " + generate " +
              dir + " " + Path("prompt.safetensors") + " " + std::to_string(kNewTokens) + " " +
              Path(arch + ".tokens");
    }
    const ::testing::AssertionResult made = RunTransformers(args);
    if (!made) failure_ = new std::string(made.message());
  }
  static void TearDownTestSuite() {
    delete scratch_;
    scratch_ = nullptr;
    delete failure_;
    failure_ = nullptr;
  }

  void SetUp() override {
    CONVEYOR_SKIP_WITHOUT_REFERENCE_ENV();
    at::set_num_threads(1);
    ASSERT_EQ(failure_, nullptr) << *failure_;
  }

  static std::string Path(const std::string& name) { return scratch_->Path(name); }
  static at::Tensor Ids() { return TensorIn(Path("ids.safetensors"), "ids"); }

  static ScratchFolder* scratch_;
  static std::string* failure_;  // what transformers_models.py said when making failed
};

ScratchFolder* TransformersCheckTest::scratch_ = nullptr;
std::string* TransformersCheckTest::failure_ = nullptr;

// Each folder save_pretrained wrote is read as the architecture transformers made; conveyor's
// logits on one rank are transformers' (fp32 rounding aside), its loss on every mesh
// transformers' own loss (labels=ids).
TEST_F(TransformersCheckTest, SavedFoldersGiveTransformersLogitsAndLossOnEveryMesh) {
  const at::Tensor ids = Ids();
  for (const std::string& arch : kArchitectures) {
    SCOPED_TRACE(arch);
    const TrainConfig c = FromFolder(Path(arch), arch == "gpt2");
    EXPECT_EQ(c.model.kind, arch == "gpt2" ? ModelKind::kGpt : ModelKind::kLlama);
    EXPECT_EQ(c.model.layers, 6);
    EXPECT_EQ(c.model.vocab, 256);
    EXPECT_EQ(c.model.experts, arch == "llama" || arch == "gpt2" ? 0 : 4);
    if (arch != "gpt2") EXPECT_EQ(c.model.kv_heads, 2);
    if (arch == "qwen3_moe") {
      EXPECT_EQ(c.model.qk_norm, "head");
      EXPECT_EQ(c.model.moe_sparse_step, 2);
      EXPECT_EQ(c.model.moe_dense_layers, std::vector<int>{3});
    }
    if (arch == "qwen2_moe") {
      EXPECT_TRUE(c.model.qkv_bias);
      EXPECT_EQ(c.model.shared_expert_units, 16);
    }
    const std::string file = Path(arch + ".logits");
    const at::Tensor want = TensorIn(file, "logits").slice(1, 0, 16);
    const double loss = TensorIn(file, "loss").item<double>();
    const at::Tensor got = LogitsOnOneRank(c, ids.slice(1, 0, 16));
    ASSERT_EQ(got.sizes(), want.sizes());
    const double scale = want.abs().max().item<double>();
    EXPECT_GT(scale, 5) << "logits this small are nearly uniform: a weak check";
    EXPECT_TRUE(at::allclose(got, want, 1e-4, 1e-4 * scale))
        << "differ by " << (got - want).abs().max().item<double>() << " of " << scale;
    ExpectEvalLossOnEveryMesh(c, RowWindows(ids, 4), 8 * 16, loss);
  }
}

// Greedy generation (temperature 0) from transformers' folders continues the prompt with
// the tokens of transformers' generate(do_sample=False), with and without the key-value
// cache, on one rank and on tp 2 x pp 2.
TEST_F(TransformersCheckTest, GreedyGenerationIsTransformers) {
  const at::Tensor prompt_ids = TensorIn(Path("prompt.safetensors"), "ids")[0];
  const std::vector<int64_t> prompt(prompt_ids.data_ptr<int64_t>(),
                                    prompt_ids.data_ptr<int64_t>() + prompt_ids.numel());
  for (const std::string& arch : kArchitectures) {
    SCOPED_TRACE(arch);
    const at::Tensor tokens = TensorIn(Path(arch + ".tokens"), "tokens");
    const std::vector<int64_t> want(tokens.data_ptr<int64_t>(),
                                    tokens.data_ptr<int64_t>() + tokens.numel());
    ASSERT_EQ(want.size(), static_cast<size_t>(kNewTokens));
    TrainConfig c = FromFolder(Path(arch), arch == "gpt2");
    for (const bool mesh : {false, true}) {
      c.tp = c.pp = mesh ? 2 : 1;
      c.schedule = mesh ? "1f1b" : "gpipe";
      TrainOnThreads(
          c,
          [&](Trainer& t, Transport&) {
            ForwardPipeline forward(t.model());
            for (const bool cache : {true, false}) {
              Sampling greedy;
              greedy.temperature = 0;
              EXPECT_EQ(
                  GenerateTokens(forward, prompt, kNewTokens, greedy, 1, c.model.seq_len, cache),
                  want)
                  << (mesh ? "tp 2 x pp 2" : "one rank") << (cache ? ", key-value cache" : "");
            }
          },
          -1);
    }
  }
}

// Trained two steps on pp 2 and exported as `conveyor export` does, in small files with an
// index (fp32) or whole as bf16: transformers loads both; its loss with the fp32 folder is
// conveyor's with the trained model, with the bf16 folder (loaded as float32) conveyor's
// with the same bf16 folder.
TEST_F(TransformersCheckTest, ExportsGiveConveyorsLossInTransformers) {
  const at::Tensor ids = Ids();
  const std::vector<Batch> windows = RowWindows(ids, 4);
  std::map<std::string, double> trained, bf16;
  std::string args;
  for (const std::string& arch : kArchitectures) {
    SCOPED_TRACE(arch);
    TrainConfig c = FromFolder(Path(arch), arch == "gpt2");
    c.pp = 2;
    c.schedule = "1f1b";
    c.steps = 2;
    const std::string ckpt = Path(arch + "_ckpt");
    TrainOnThreads(c, [&](Trainer& t, Transport& world) {
      SaveCheckpoint(ckpt, t, c, &world);
      ForwardPipeline forward(t.model());
      const TokenEvalMetrics m = EvaluateTokens(forward, windows);
      if (t.model().rank() == 0) trained[arch] = m.loss;
    });
    const std::string fp32 = Path(arch + "_fp32"), half = Path(arch + "_bf16");
    HfWriteOptions sharded;
    sharded.shard_bytes = 40000;
    EXPECT_GT(ExportHfCheckpoint(ckpt, fp32, sharded).size(), 2u);
    EXPECT_TRUE(fs::exists(fp32 + "/model.safetensors.index.json"));
    HfWriteOptions small;
    small.dtype = at::kBFloat16;
    ASSERT_EQ(ExportHfCheckpoint(ckpt, half, small), std::vector<std::string>{"model.safetensors"});
    for (const auto& [name, t] : LoadSafetensors(half + "/model.safetensors").tensors) {
      EXPECT_EQ(t.scalar_type(), at::kBFloat16) << name;
    }
    bf16[arch] = EvalLossOnOneRank(FromFolder(half, arch == "gpt2"), windows);
    for (const std::string& out : {fp32, half}) {
      args += (args.empty() ? "logits " : " + logits ") + out + " " + Path("ids.safetensors") +
              " " + out + ".logits";
    }
  }
  ASSERT_TRUE(RunTransformers(args));
  for (const std::string& arch : kArchitectures) {
    SCOPED_TRACE(arch);
    const double fp32 = TensorIn(Path(arch + "_fp32.logits"), "loss").item<double>();
    const double half = TensorIn(Path(arch + "_bf16.logits"), "loss").item<double>();
    EXPECT_NEAR(fp32, trained.at(arch), 1e-5 * fp32);
    EXPECT_NEAR(half, bf16.at(arch), 1e-5 * half);
    EXPECT_NE(half, fp32) << "the bf16 export rounds the weights: another loss";
  }
}

// LoRA adapters on every projection of transformers' Llama, trained 2 steps on pp 2 and
// exported in PEFT's layout (conveyor export --lora): peft's PeftModel.from_pretrained loads
// them onto the transformers model, which then gives conveyor's logits of the trained model.
TEST_F(TransformersCheckTest, LoraAdaptersLoadInPeftAndGiveConveyorsLogits) {
  const at::Tensor ids = Ids().slice(1, 0, 16).contiguous();
  TrainConfig c = FromFolder(Path("llama"), false);
  c.model.lora_rank = 4;
  c.model.lora_alpha = 8;
  c.model.lora_targets = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj";
  c.lr = 1e-2;
  c.steps = 2;
  c.pp = 2;
  c.schedule = "1f1b";
  const std::string ckpt = Path("lora_ckpt");
  TrainOnThreads(c, [&](Trainer& t, Transport& world) { SaveCheckpoint(ckpt, t, c, &world); });
  TrainConfig trained = c;  // the checkpoint on one rank
  trained.pp = 1;
  trained.schedule = "gpipe";
  trained.resume = ckpt;
  at::Tensor want;
  TrainOnThreads(
      trained,
      [&](Trainer& t, Transport&) {
        ForwardPipeline forward(t.model());
        want = forward.Run(SplitBatch(Batch{ids, at::roll(ids, -1, 1), {}}, 1))
                   .outputs.at(0)
                   .to(at::kFloat);
      },
      -1);
  const std::string adapter = Path("lora_adapter");
  EXPECT_EQ(ExportLoraAdapter(ckpt, adapter, at::kFloat), 7 * 6);
  SaveSafetensors(Path("lora_ids.safetensors"), {{"ids", ids}});
  ASSERT_TRUE(RunTransformers("logits " + Path("llama") + " " + Path("lora_ids.safetensors") + " " +
                              Path("lora.logits") + " " + adapter));
  const at::Tensor got = TensorIn(Path("lora.logits"), "logits");
  const at::Tensor base = TensorIn(Path("llama.logits"), "logits").slice(1, 0, 16);
  ASSERT_EQ(got.sizes(), want.sizes());
  const double scale = want.abs().max().item<double>();
  EXPECT_GT((want - base).abs().max().item<double>(), 1e-3 * scale)
      << "the adapters changed nothing: a weak check";
  EXPECT_TRUE(at::allclose(got, want, 1e-4, 1e-4 * scale))
      << "differ by " << (got - want).abs().max().item<double>() << " of " << scale;
}

}  // namespace
}  // namespace conveyor
