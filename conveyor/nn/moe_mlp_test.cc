#include "conveyor/nn/moe_mlp.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "conveyor/comm/local_transport.h"
#include "conveyor/comm/rank_threads.h"
#include "conveyor/common/error.h"
#include "conveyor/module/auxiliary_loss.h"

namespace conveyor {
namespace {

// The block computed token by token with plain ATen, as Hugging Face's Mixtral / Qwen-MoE
// modules define it: x (N, C) -> (N, C), from the block's parameters by name.
at::Tensor ReferenceMoe(const MoeConfig& c, const at::Tensor& x,
                        const std::map<std::string, at::Tensor>& p, const std::string& prefix) {
  auto swiglu = [](const at::Tensor& t, const at::Tensor& g, const at::Tensor& u,
                   const at::Tensor& d) {
    return at::linear(at::silu(at::linear(t, g)) * at::linear(t, u), d);
  };
  const std::string g = c.mixtral_names ? "w1" : "gate_proj",
                    u = c.mixtral_names ? "w3" : "up_proj",
                    d = c.mixtral_names ? "w2" : "down_proj";
  std::vector<at::Tensor> rows;
  for (int64_t i = 0; i < x.size(0); ++i) {
    const at::Tensor token = x[i].unsqueeze(0);                                     // (1, C)
    const at::Tensor logits = at::linear(token, p.at(prefix + ".gate.weight"))[0];  // (E)
    const at::Tensor scores =
        c.scoring == RouterScoring::kSoftmax ? at::softmax(logits, 0) : at::sigmoid(logits);
    const at::Tensor chosen = std::get<1>(scores.detach().topk(c.top_k));
    at::Tensor gates = scores.index_select(0, chosen);
    if (c.renormalize) gates = gates / gates.sum();
    at::Tensor out = at::zeros_like(token);
    for (int64_t j = 0; j < c.top_k; ++j) {
      const std::string e = prefix + ".experts." + std::to_string(chosen[j].item<int64_t>()) + ".";
      out = out + gates[j] * swiglu(token, p.at(e + g + ".weight"), p.at(e + u + ".weight"),
                                    p.at(e + d + ".weight"));
    }
    if (c.shared_units > 0) {
      const std::string s = prefix + ".shared_expert.";
      at::Tensor shared = swiglu(token, p.at(s + "gate_proj.weight"), p.at(s + "up_proj.weight"),
                                 p.at(s + "down_proj.weight"));
      if (c.shared_gate) {
        shared =
            shared * at::sigmoid(at::linear(token, p.at(prefix + ".shared_expert_gate.weight")));
      }
      out = out + shared;
    }
    rows.push_back(out);
  }
  return at::cat(rows);
}

struct Case {
  std::string what;
  MoeConfig config;
};

std::vector<Case> Cases() {
  MoeConfig base;
  base.hidden = 16;
  base.experts = 6;
  base.top_k = 2;
  base.expert_units = 12;
  std::vector<Case> cases = {{"softmax, renormalised (Mixtral)", base}};
  MoeConfig plain = base;
  plain.renormalize = false;
  cases.push_back({"softmax, not renormalised (norm_topk_prob false)", plain});
  MoeConfig sigmoid = base;
  sigmoid.scoring = RouterScoring::kSigmoid;
  sigmoid.top_k = 3;
  cases.push_back({"sigmoid, top-3", sigmoid});
  MoeConfig shared = base;
  shared.shared_units = 20;
  shared.shared_gate = true;
  cases.push_back({"a gated shared expert (Qwen2-MoE)", shared});
  MoeConfig mixtral = base;
  mixtral.mixtral_names = true;
  mixtral.top_k = 1;
  cases.push_back({"Mixtral's names, top-1", mixtral});
  return cases;
}

// Output and every gradient (input and parameters) equal the token-by-token reference.
TEST(MoeMlpTest, OutputAndGradientsEqualATokenByTokenReference) {
  for (const Case& test : Cases()) {
    ParameterSpecs specs;
    MoeMlp moe(test.config, "model.layers.1.mlp", 7, specs);
    const at::Tensor x = at::randn({3, 5, test.config.hidden}).requires_grad_(true);
    const at::Tensor y = moe.Forward(x);
    ASSERT_EQ(y.sizes(), x.sizes()) << test.what;
    const at::Tensor g = at::randn(y.sizes());
    (y * g).sum().backward();

    std::map<std::string, at::Tensor> copies;
    for (const auto& [name, p] : moe.NamedParameters()) {
      copies[name] = p.detach().clone().requires_grad_(true);
    }
    const at::Tensor x2 = x.detach().clone().requires_grad_(true);
    const at::Tensor want = ReferenceMoe(test.config, x2.reshape({15, test.config.hidden}), copies,
                                         "model.layers.1.mlp");
    (want.reshape(y.sizes()) * g).sum().backward();
    EXPECT_TRUE(at::allclose(y, want.reshape(y.sizes()), 1e-5, 1e-6)) << test.what;
    EXPECT_TRUE(at::allclose(x.grad(), x2.grad(), 1e-5, 1e-6)) << test.what;
    for (const auto& [name, p] : moe.NamedParameters()) {
      const at::Tensor got = p.grad().defined() ? p.grad() : at::zeros_like(p);
      const at::Tensor expected =
          copies[name].grad().defined() ? copies[name].grad() : at::zeros_like(p);
      EXPECT_TRUE(at::allclose(got, expected, 1e-5, 1e-6)) << test.what << ": " << name;
    }
  }
}

// The names and shapes the block lists are those its parameters have, Hugging Face's.
TEST(MoeMlpTest, ParametersCarryHuggingFaceNamesAndShapes) {
  MoeConfig c;
  c.experts = 2;
  c.shared_units = 8;
  c.shared_gate = true;
  ParameterSpecs specs;
  MoeMlp moe(c, "model.layers.0.mlp", 1, specs);
  const NamedTensors params = moe.NamedParameters();
  const NamedShapes shapes = MoeParameterShapes(c, "model.layers.0.mlp");
  ASSERT_EQ(params.size(), shapes.size());
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i].first, shapes[i].first);
    EXPECT_EQ(params[i].second.sizes().vec(), shapes[i].second) << shapes[i].first;
  }
  EXPECT_EQ(params[0].first, "model.layers.0.mlp.gate.weight");
  EXPECT_EQ(params[1].first, "model.layers.0.mlp.experts.0.gate_proj.weight");
  EXPECT_EQ(params.back().first, "model.layers.0.mlp.shared_expert_gate.weight");
  c.mixtral_names = true;
  EXPECT_EQ(MoeParameterShapes(c, "model.layers.0.block_sparse_moe")[3].first,
            "model.layers.0.block_sparse_moe.experts.0.w2.weight");
}

// The Switch loss and the z-loss against values computed by hand from a router whose choice
// is known: 4 tokens, 2 experts, top-1.
TEST(MoeMlpTest, AuxiliaryLossesEqualHandComputedValues) {
  MoeConfig c;
  c.hidden = 2;
  c.experts = 2;
  c.top_k = 1;
  c.expert_units = 3;
  c.aux_loss_coef = 0.01;
  c.z_loss_coef = 0.001;
  ParameterSpecs specs;
  MoeMlp moe(c, "m", 3, specs);
  {
    at::NoGradGuard no_grad;
    moe.NamedParameters()[0].second.copy_(at::tensor({1.0f, 0.0f, 0.0f, 1.0f}).view({2, 2}));
  }
  // Logits are the tokens themselves: three choose expert 0, one expert 1.
  const at::Tensor x = at::tensor({2.0f, 0.0f, 1.0f, 0.0f, 3.0f, 1.0f, 0.0f, 1.0f}).view({1, 4, 2});
  AuxiliaryLosses sink;
  {
    AuxiliaryLosses::Recording recording(&sink, 1, 1, true);
    moe.Forward(x);
  }
  const at::Tensor logits = x.view({4, 2});
  const at::Tensor probs = at::softmax(logits, -1);
  const double p0 = probs.select(1, 0).mean().item<double>(), p1 = 1 - p0;
  const double balance = 0.01 * 2 * (0.75 * p0 + 0.25 * p1);
  const double z = 0.001 * logits.logsumexp(-1).square().mean().item<double>();
  const std::map<std::string, double> values = sink.Values();
  EXPECT_NEAR(values.at("load_balance"), balance, 1e-7);
  EXPECT_NEAR(values.at("router_z"), z, 1e-7);
  EXPECT_EQ(moe.load()[0].item<int64_t>(), 3);
  EXPECT_EQ(moe.load()[1].item<int64_t>(), 1);
}

// The load counts only counted forwards (never a recomputation nor an evaluation), and the
// auxiliary-loss-free bias update moves each expert's bias by the rate towards the mean load.
TEST(MoeMlpTest, LoadCountsOnceAndTheSelectionBiasMovesTowardsTheMeanLoad) {
  MoeConfig c;
  c.hidden = 8;
  c.experts = 4;
  c.top_k = 2;
  c.expert_units = 4;
  c.bias_rate = 0.001;
  ParameterSpecs specs;
  MoeMlp moe(c, "m", 5, specs);
  const at::Tensor x = at::randn({2, 3, 8});
  AuxiliaryLosses sink;
  {
    AuxiliaryLosses::Recording counted(&sink, 0.5, 1, true);
    moe.Forward(x);
  }
  {
    AuxiliaryLosses::Recording recompute(&sink, 0.5, 1, false);
    moe.Forward(x);
  }
  moe.Forward(x);                                          // outside any recording: evaluation
  EXPECT_EQ(moe.load().sum().item<int64_t>(), 2 * 3 * 2);  // one forward's N k slots

  moe.UpdateSelectionBias(at::tensor({3, 1, 0, 4}, at::kLong));  // mean 2
  const std::vector<float> want = {-0.001f, 0.001f, 0.001f, -0.001f};
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(moe.selection_bias()[i].item<float>(), want[i]);
  moe.ResetLoad();
  EXPECT_EQ(moe.load().sum().item<int64_t>(), 0);
}

// The selection bias only chooses: with a large bias on expert 2 every token goes there (and
// one other), while the gates still come from the unbiased scores.
TEST(MoeMlpTest, TheSelectionBiasChoosesButDoesNotWeigh) {
  MoeConfig c;
  c.hidden = 8;
  c.experts = 4;
  c.top_k = 1;
  c.expert_units = 4;
  c.bias_rate = 10;
  c.renormalize = false;
  ParameterSpecs specs;
  MoeMlp moe(c, "m", 9, specs);
  moe.UpdateSelectionBias(at::tensor({1, 1, 0, 1}, at::kLong));  // expert 2: +10, others -10
  const at::Tensor x = at::randn({1, 6, 8});
  AuxiliaryLosses sink;
  at::Tensor y;
  {
    AuxiliaryLosses::Recording counted(&sink, 1, 1, true);
    y = moe.Forward(x);
  }
  EXPECT_EQ(moe.load()[2].item<int64_t>(), 6);
  // Expert 2's output weighted by its unbiased softmax probability.
  const NamedTensors p = moe.NamedParameters();
  const at::Tensor flat = x.view({6, 8});
  const at::Tensor prob = at::softmax(at::linear(flat, p[0].second), -1).select(1, 2).unsqueeze(1);
  const at::Tensor expert = at::linear(
      at::silu(at::linear(flat, p[7].second)) * at::linear(flat, p[8].second), p[9].second);
  EXPECT_TRUE(at::allclose(y.view({6, 8}), prob * expert, 1e-5, 1e-6));
}

// Under expert parallelism (ep 2 and 4 of 8 experts, threads over the in-process transport)
// each rank's output and input gradient equal one process's on that rank's tokens, and each
// expert's gradient on the rank holding it is the sum of one process's over every rank's
// tokens; the router's is each rank's own.
TEST(MoeMlpTest, ExpertParallelRanksComputeAsOneProcess) {
  MoeConfig c;
  c.hidden = 12;
  c.experts = 8;
  c.top_k = 2;
  c.expert_units = 10;
  c.shared_units = 6;
  for (int ep : {2, 4}) {
    std::vector<at::Tensor> inputs, grads_out;
    for (int r = 0; r < ep; ++r) {
      inputs.push_back(at::randn({2, 3 + r, c.hidden}));  // uneven token counts
      grads_out.push_back(at::randn({2, 3 + r, c.hidden}));
    }
    // One process, every rank's tokens in turn: outputs, input gradients, and parameter
    // gradients per rank.
    std::vector<at::Tensor> want_y, want_dx;
    std::vector<std::map<std::string, at::Tensor>> want_grads(ep);
    for (int r = 0; r < ep; ++r) {
      ParameterSpecs specs;
      MoeMlp whole(c, "mlp", 11, specs);
      const at::Tensor x = inputs[r].clone().requires_grad_(true);
      const at::Tensor y = whole.Forward(x);
      (y * grads_out[r]).sum().backward();
      want_y.push_back(y.detach());
      want_dx.push_back(x.grad());
      for (const auto& [name, p] : whole.NamedParameters()) {
        want_grads[r][name] = p.grad().defined() ? p.grad() : at::zeros_like(p);
      }
    }
    auto world = LocalWorld(ep);
    RunRankThreads(world, [&](int r) {
      ParameterSpecs specs;
      MoeMlp part(c, "mlp", 11, specs, ExpertParallel{ep, r, world[r].get()});
      EXPECT_EQ(part.NamedParameters().size(), 1 + 3 * 8 / ep + 3);
      const at::Tensor x = inputs[r].clone().requires_grad_(true);
      const at::Tensor y = part.Forward(x);
      (y * grads_out[r]).sum().backward();
      EXPECT_TRUE(at::allclose(y, want_y[r], 1e-5, 1e-6)) << "ep " << ep << " rank " << r;
      EXPECT_TRUE(at::allclose(x.grad(), want_dx[r], 1e-5, 1e-6)) << "ep " << ep << " rank " << r;
      for (const auto& [name, p] : part.NamedParameters()) {
        at::Tensor want = want_grads[r][name];
        if (name.find(".experts.") != std::string::npos) {  // every rank's tokens reach it
          want = at::zeros_like(p);
          for (int s = 0; s < ep; ++s) want = want + want_grads[s][name];
        }
        const at::Tensor got = p.grad().defined() ? p.grad() : at::zeros_like(p);
        EXPECT_TRUE(at::allclose(got, want, 1e-5, 1e-6))
            << "ep " << ep << " rank " << r << ": " << name;
      }
    });
  }
}

TEST(MoeMlpTest, ExpertsThatDoNotDivideOverTheRanksAreRefused) {
  MoeConfig c;
  c.experts = 6;
  auto world = LocalWorld(4);
  ParameterSpecs specs;
  try {
    MoeMlp moe(c, "mlp", 1, specs, ExpertParallel{4, 0, world[0].get()});
    FAIL() << "6 experts over 4 ranks";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("6 experts must divide evenly over --ep 4"),
              std::string::npos)
        << e.what();
  }
}

// With a capacity factor each expert keeps its first copies by position, or those of the
// highest gates, and drops the rest: 4 tokens all routed to expert 0 of 2, capacity
// ceil(0.5 x 4 / 2) = 1.
TEST(MoeMlpTest, ACapacityFactorDropsCopiesByPositionOrProbability) {
  for (TokenDrop drop : {TokenDrop::kPosition, TokenDrop::kProbability}) {
    MoeConfig c;
    c.hidden = 2;
    c.experts = 2;
    c.top_k = 1;
    c.expert_units = 3;
    c.renormalize = false;
    c.capacity_factor = 0.5;
    c.drop_by = drop;
    ParameterSpecs specs;
    MoeMlp moe(c, "m", 3, specs);
    {
      at::NoGradGuard no_grad;
      moe.NamedParameters()[0].second.copy_(at::tensor({1.0f, 0.0f, 0.0f, 0.0f}).view({2, 2}));
    }
    // Logits (x0, 0): every token prefers expert 0, token 2 the most.
    const at::Tensor x =
        at::tensor({1.0f, 1.0f, 2.0f, 1.0f, 3.0f, 1.0f, 0.5f, 1.0f}).view({1, 4, 2});
    AuxiliaryLosses sink;
    at::Tensor y;
    {
      AuxiliaryLosses::Recording counted(&sink, 1, 1, true);
      y = moe.Forward(x).view({4, 2});
    }
    const int64_t kept = drop == TokenDrop::kPosition ? 0 : 2;
    for (int64_t i = 0; i < 4; ++i) {
      EXPECT_EQ(y[i].abs().sum().item<float>() > 0, i == kept) << "token " << i << ": " << y;
    }
    EXPECT_EQ(moe.dropped(), 3);
    EXPECT_EQ(moe.load()[0].item<int64_t>(), 4);  // routed, before dropping
  }
}

TEST(MoeMlpTest, BadSettingsAreRefusedByName) {
  MoeConfig c;
  c.top_k = 9;
  c.experts = 8;
  EXPECT_THROW(CheckMoeConfig(c), UserError);
  c.top_k = 2;
  c.aux_loss_coef = -1;
  EXPECT_THROW(CheckMoeConfig(c), UserError);
  c.aux_loss_coef = 0;
  c.capacity_factor = -0.5;
  EXPECT_THROW(CheckMoeConfig(c), UserError);
  c.capacity_factor = 0;
  c.experts = 0;
  EXPECT_THROW(CheckMoeConfig(c), UserError);
}

}  // namespace
}  // namespace conveyor
