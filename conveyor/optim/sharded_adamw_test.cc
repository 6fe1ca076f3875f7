#include "conveyor/optim/sharded_adamw.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "conveyor/comm/local_transport.h"
#include "conveyor/comm/rank_threads.h"
#include "conveyor/common/error.h"

namespace conveyor {
namespace {

// Parameters of three shapes (51 elements, cut at 26 for two replicas, 17 and 34 for three:
// inside the matrix and the 3D tensor) and their gradients at steps 1 to 4, random; every
// replica takes copies (the generator is not for threads).
struct Inputs {
  NamedTensors params;
  std::vector<std::vector<at::Tensor>> grads;  // [step - 1][parameter]
};

Inputs RandomInputs() {
  at::manual_seed(7);
  Inputs in;
  in.params = {{"w", at::randn({5, 7})}, {"b", at::randn({4})}, {"k", at::randn({3, 2, 2})}};
  for (int step = 1; step <= 4; ++step) {
    in.grads.emplace_back();
    for (const auto& [name, p] : in.params) in.grads.back().push_back(at::randn_like(p));
  }
  return in;
}

NamedTensors Copy(const NamedTensors& params) {
  NamedTensors copy;
  for (const auto& [name, p] : params) copy.emplace_back(name, p.clone());
  return copy;
}

void SetGrads(const NamedTensors& params, const Inputs& in, int64_t step) {
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].second.mutable_grad() = in.grads[step - 1][i].clone();
  }
}

// Makes the gradients outside flat elements [begin, end) NaN, as a reduce-scatter leaves
// them unsummed: the optimizer must not read them.
void PoisonOutside(const NamedTensors& params, int64_t begin, int64_t end) {
  int64_t offset = 0;
  for (const auto& [name, p] : params) {
    at::Tensor flat = p.mutable_grad().view({-1});
    for (int64_t i = 0; i < p.numel(); ++i) {
      if (offset + i < begin || offset + i >= end) flat[i] = NAN;
    }
    offset += p.numel();
  }
}

// Each replica updates its range and gathers the others': the weights and the gathered state
// are plain AdamW's, each replica holds its range of the state (and reads only that range of
// the gradients), and state loaded from plain AdamW continues like it.
TEST(ShardedAdamWTest, MatchesPlainAdamW) {
  const AdamWOptions options{.weight_decay = 0.1};
  for (const int replicas : {2, 3}) {
    const Inputs in = RandomInputs();
    AdamW plain(options);
    NamedTensors want = Copy(in.params);
    for (int64_t step = 1; step <= 3; ++step) {
      SetGrads(want, in, step);
      plain.Step(want, 0.05, step);
    }
    auto world = LocalWorld(replicas);
    RunRankThreads(world, [&](int r) {
      ShardedAdamW sharded(options, world[r].get());
      NamedTensors got = Copy(in.params);
      EXPECT_TRUE(sharded.State().empty());
      EXPECT_EQ(sharded.StateBytes(), 0);
      const auto [begin, end] = ShardLayout::Range(51, replicas, r);
      for (int64_t step = 1; step <= 3; ++step) {
        SetGrads(got, in, step);
        PoisonOutside(got, begin, end);
        sharded.Step(got, 0.05, step);
      }
      EXPECT_EQ(sharded.StateBytes(), 2 * (end - begin) * 4);
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_TRUE(at::allclose(got[i].second, want[i].second, 1e-6, 1e-7))
            << replicas << " replicas, rank " << r << ": " << want[i].first;
      }
      const auto state = sharded.State();
      const auto plain_state = plain.State();
      ASSERT_EQ(state.size(), plain_state.size());
      for (const auto& [key, t] : plain_state) {
        ASSERT_TRUE(state.count(key)) << key;
        EXPECT_TRUE(at::allclose(state.at(key), t, 1e-6, 1e-9)) << key;
      }
      // Resumed from plain AdamW's state, one more step agrees with plain AdamW's.
      ShardedAdamW resumed(options, world[r].get());
      resumed.LoadState(got, plain_state);
      EXPECT_EQ(resumed.StateBytes(), sharded.StateBytes());
      NamedTensors next = Copy(want);
      AdamW plain_next(options);
      plain_next.LoadState(next, plain_state);
      SetGrads(next, in, 4);
      plain_next.Step(next, 0.05, 4);
      SetGrads(got, in, 4);
      PoisonOutside(got, begin, end);
      resumed.Step(got, 0.05, 4);
      for (size_t i = 0; i < next.size(); ++i) {
        EXPECT_TRUE(at::allclose(got[i].second, next[i].second, 1e-6, 1e-7))
            << "resumed, rank " << r << ": " << next[i].first;
      }
      auto wrong = plain_state;
      wrong["w/exp_avg"] = at::zeros({7, 5});
      EXPECT_THROW(resumed.LoadState(got, wrong), UserError);
    });
  }
}

}  // namespace
}  // namespace conveyor
