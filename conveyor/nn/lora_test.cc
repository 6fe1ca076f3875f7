#include "conveyor/nn/lora.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/nn/linear.h"
#include "conveyor/nn/llama.h"
#include "conveyor/nn/llama_testing.h"

namespace conveyor {
namespace {

// The UserError `run` throws, "" when it throws none.
template <typename Run>
std::string RefusalOf(Run&& run) {
  try {
    run();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

LlamaConfig LoraLlama(int rank, std::vector<std::string> targets = LoraTargetNames()) {
  LlamaConfig c = TinyLlamaConfig();
  c.lora = LoraConfig{.rank = rank, .alpha = 2.0 * rank, .targets = std::move(targets)};
  return c;
}

TEST(LoraTest, TargetsParseAndUnknownOnesAreRefusedByName) {
  EXPECT_EQ(ParseLoraTargets("", "--lora-targets"), DefaultLoraTargets());
  EXPECT_EQ(ParseLoraTargets("v_proj,down_proj", "--lora-targets"),
            (std::vector<std::string>{"v_proj", "down_proj"}));
  const std::string unknown = RefusalOf([] { ParseLoraTargets("q_proj,qkv", "--lora-targets"); });
  EXPECT_NE(unknown.find("'qkv' names no layer"), std::string::npos) << unknown;
  EXPECT_NE(RefusalOf([] { ParseLoraTargets("q_proj,q_proj", "--lora-targets"); }).find("twice"),
            std::string::npos);
  EXPECT_TRUE(IsLoraParameter("model.layers.0.self_attn.q_proj.lora_A.weight"));
  EXPECT_FALSE(IsLoraParameter("model.layers.0.self_attn.q_proj.weight"));
  EXPECT_EQ(LoraBName("model.layers.1.mlp.up_proj.weight"),
            "model.layers.1.mlp.up_proj.lora_B.weight");
}

// A rank of 0, one above a layer's width, adapters on a Mixture-of-Experts model: refused in
// one line naming the value.
TEST(LoraTest, BadRanksAndModelsAreRefusedInOneLine) {
  const std::string zero = RefusalOf([] { CheckLlamaConfig(LoraLlama(0)); });
  EXPECT_NE(zero.find("--lora-rank must be at least 1, got 0"), std::string::npos) << zero;
  // k_proj is (2 heads x 8, 32): 16 wide.
  const std::string wide = RefusalOf([] { CheckLlamaConfig(LoraLlama(17, {"k_proj"})); });
  EXPECT_NE(wide.find("--lora-rank 17 exceeds the width of k_proj (16 x 32: at most 16)"),
            std::string::npos)
      << wide;
  CheckLlamaConfig(LoraLlama(16, {"k_proj"}));
  LlamaConfig moe = LoraLlama(4);
  moe.moe = LlamaMoe{};
  moe.moe->block.experts = 4;
  EXPECT_NE(RefusalOf([&] { CheckLlamaConfig(moe); }).find("Mixture-of-Experts"),
            std::string::npos);
  for (const std::string& message : {zero, wide}) {
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

// With B zeros the model's logits are the base's bit for bit, and only the adapters require
// gradients; with B drawn, they are those of the base with each adapted weight merged
// (W + alpha / r B A).
TEST(LoraTest, ZeroAdaptersLeaveTheBaseAndDrawnOnesEqualTheMergedWeights) {
  const LlamaConfig plain = TinyLlamaConfig();
  const LlamaConfig lora = LoraLlama(4);
  const LayerList base = BuildLlama(plain, 7);
  const LayerList adapted = BuildLlama(lora, 7);
  const at::Tensor ids = RandomIds(plain, 2, 16, 3);
  EXPECT_TRUE(at::equal(LogitsOf(adapted, ids), LogitsOf(base, ids)));
  std::map<std::string, at::Tensor> params = ParametersByName(adapted);
  int adapters = 0;
  for (const auto& layer : adapted) {
    for (const auto& [name, p] : layer->NamedParameters()) {
      EXPECT_EQ(p.requires_grad(), IsLoraParameter(name)) << name;
      adapters += IsLoraParameter(name) ? 1 : 0;
    }
  }
  EXPECT_EQ(adapters, 2 * 7 * plain.layers);
  {
    at::NoGradGuard no_grad;
    for (const auto& layer : adapted) {
      for (const auto& [name, p] : layer->NamedParameters()) {
        if (name.find(".lora_B.") != std::string::npos) p.normal_(0, 0.5);
      }
    }
  }
  params = ParametersByName(adapted);
  {
    at::NoGradGuard no_grad;
    for (const auto& layer : base) {
      for (const auto& [name, p] : layer->NamedParameters()) {
        if (!params.count(LoraAName(name))) continue;
        p.copy_(MergeLora(params.at(name), params.at(LoraAName(name)), params.at(LoraBName(name)),
                          lora.lora->scale()));
      }
    }
  }
  const at::Tensor want = LogitsOf(base, ids), got = LogitsOf(adapted, ids);
  EXPECT_GT((got - LogitsOf(BuildLlama(plain, 7), ids)).abs().max().item<double>(), 1e-2)
      << "the drawn adapters change nothing: a weak check";
  EXPECT_LT(RelativeError(got, want), 1e-5);
}

// A frozen weight gets no gradient through Linear (nothing computed for it); the input's
// gradient is unchanged.
TEST(LoraTest, AFrozenWeightGetsNoGradient) {
  const at::Tensor x = at::randn({3, 5}).requires_grad_(true);
  const at::Tensor w = at::randn({4, 5});
  Linear(x, w, at::Tensor()).sum().backward();
  EXPECT_FALSE(w.grad().defined());
  EXPECT_TRUE(at::allclose(x.grad(), at::ones({3, 4}).mm(w)));
}

}  // namespace
}  // namespace conveyor
