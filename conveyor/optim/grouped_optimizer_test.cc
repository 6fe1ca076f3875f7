#include "conveyor/optim/grouped_optimizer.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

NamedTensors Params() {
  at::manual_seed(3);
  return {{"dense.w", at::randn({4, 3})},
          {"experts.0.w", at::randn({2, 3})},
          {"dense.b", at::randn({4})},
          {"experts.1.w", at::randn({2, 3})}};
}

NamedTensors Copy(const NamedTensors& params) {
  NamedTensors copy;
  for (const auto& [name, p] : params) copy.emplace_back(name, p.clone());
  return copy;
}

size_t ExpertOrDense(const std::string& name) { return name.rfind("experts.", 0) == 0 ? 1 : 0; }

std::unique_ptr<GroupedOptimizer> TwoGroups() {
  std::vector<std::unique_ptr<Optimizer>> optimizers;
  optimizers.push_back(std::make_unique<AdamW>(AdamWOptions{}));
  optimizers.push_back(std::make_unique<AdamW>(AdamWOptions{}));
  return std::make_unique<GroupedOptimizer>(std::move(optimizers), ExpertOrDense);
}

// Two groups of AdamW update as one AdamW of every parameter: the same weights and state.
TEST(GroupedOptimizerTest, GroupsUpdateAsOneOptimizer) {
  const NamedTensors init = Params();
  NamedTensors one = Copy(init), grouped = Copy(init);
  AdamW whole(AdamWOptions{});
  const std::unique_ptr<GroupedOptimizer> parts = TwoGroups();
  for (int64_t step = 1; step <= 3; ++step) {
    for (size_t i = 0; i < init.size(); ++i) {
      const at::Tensor g = at::randn_like(init[i].second);
      one[i].second.mutable_grad() = g.clone();
      grouped[i].second.mutable_grad() = g.clone();
    }
    whole.Step(one, 1e-2, step);
    parts->Step(grouped, 1e-2, step);
  }
  for (size_t i = 0; i < init.size(); ++i) {
    EXPECT_TRUE(at::equal(one[i].second, grouped[i].second)) << one[i].first;
    EXPECT_FALSE(at::equal(one[i].second, init[i].second)) << one[i].first;
  }
  const auto want = whole.State(), got = parts->State();
  ASSERT_EQ(want.size(), got.size());
  for (const auto& [key, t] : want) EXPECT_TRUE(at::equal(got.at(key), t)) << key;
  EXPECT_EQ(parts->StateBytes(), whole.StateBytes());
}

// A state missing one group's entry is refused before any group loads.
TEST(GroupedOptimizerTest, AStateMissingAnEntryLoadsNothing) {
  const NamedTensors params = Params();
  std::map<std::string, at::Tensor> state;
  for (const auto& [name, p] : params) {
    state[name + "/exp_avg"] = at::zeros_like(p);
    state[name + "/exp_avg_sq"] = at::zeros_like(p);
  }
  state.erase("experts.1.w/exp_avg_sq");
  const std::unique_ptr<GroupedOptimizer> parts = TwoGroups();
  EXPECT_THROW(parts->LoadState(params, state), UserError);
  EXPECT_EQ(parts->StateBytes(), 0);
  EXPECT_TRUE(parts->State().empty());
}

}  // namespace
}  // namespace conveyor
