#include "conveyor/nn/expert_dispatch.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

#include "conveyor/comm/local_transport.h"
#include "conveyor/comm/rank_threads.h"

namespace conveyor {
namespace {

constexpr int kExperts = 8;
constexpr int64_t kWidth = 3;

// Rank r's token copies: 5 + 3 r rows sorted by random experts (some experts get none), each
// row naming its source and place: (r, i, 0).
struct Copies {
  at::Tensor rows;    // (M, kWidth)
  at::Tensor counts;  // (E)
  at::Tensor expert;  // (M) the expert of each row
};

Copies CopiesOf(int r) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(100 + r);
  const int64_t m = 5 + 3 * r;
  const at::Tensor expert = std::get<0>(at::randint(kExperts, {m}, gen).sort());
  Copies c;
  c.expert = expert;
  c.counts = at::bincount(expert, {}, kExperts);
  c.rows = at::stack(
      {at::full({m}, r, at::kFloat), at::arange(m, at::kFloat), at::zeros({m}, at::kFloat)}, 1);
  return c;
}

// Identity experts: every copy comes back as it left, at every ep, and so does its gradient;
// each rank's experts receive exactly the copies routed to them, expert by expert and source
// by source.
TEST(ExpertDispatchTest, IdentityExpertsReturnEveryCopyAndItsGradient) {
  for (int ep : {1, 2, 4}) {
    std::vector<std::unique_ptr<Transport>> world = LocalWorld(ep);
    std::vector<Copies> copies;
    for (int r = 0; r < ep; ++r) copies.push_back(CopiesOf(r));
    RunRankThreads(world, [&](int r) {
      const at::Tensor x = copies[r].rows.clone().requires_grad_(true);
      const ExpertParallel parallel{ep, r, ep > 1 ? world[r].get() : nullptr};
      const ExpertRows mine = DispatchToExperts(x, copies[r].counts, kExperts, parallel);
      // What this rank's experts should get: every source's rows of each of its experts.
      const int local = kExperts / ep;
      std::vector<at::Tensor> want;
      std::vector<int64_t> want_counts(local, 0);
      for (int l = 0; l < local; ++l) {
        for (int s = 0; s < ep; ++s) {
          const at::Tensor of = copies[s].expert == r * local + l;
          want.push_back(copies[s].rows.index_select(0, at::nonzero(of).squeeze(1)));
          want_counts[l] += of.sum().item<int64_t>();
        }
      }
      EXPECT_TRUE(at::equal(mine.rows, at::cat(want))) << "ep " << ep << " rank " << r;
      EXPECT_EQ(mine.per_expert, want_counts) << "ep " << ep << " rank " << r;
      const at::Tensor back = CombineFromExperts(mine.rows, mine, parallel);
      EXPECT_TRUE(at::equal(back, copies[r].rows)) << "ep " << ep << " rank " << r;
      const at::Tensor weight = at::arange(back.numel(), at::kFloat).view(back.sizes());
      (back * weight).sum().backward();
      EXPECT_TRUE(at::equal(x.grad(), weight)) << "ep " << ep << " rank " << r;
    });
  }
}

// Experts that scale their rows by (expert + 1): each copy comes back scaled by its own
// expert's factor, wherever that expert lives.
TEST(ExpertDispatchTest, EachCopyIsComputedByItsOwnExpert) {
  for (int ep : {1, 2, 4}) {
    std::vector<std::unique_ptr<Transport>> world = LocalWorld(ep);
    RunRankThreads(world, [&](int r) {
      const Copies c = CopiesOf(r);
      const ExpertParallel parallel{ep, r, ep > 1 ? world[r].get() : nullptr};
      const ExpertRows mine = DispatchToExperts(c.rows, c.counts, kExperts, parallel);
      std::vector<at::Tensor> scaled;
      int64_t begin = 0;
      for (size_t l = 0; l < mine.per_expert.size(); ++l) {
        const double factor = r * static_cast<double>(mine.per_expert.size()) + l + 1;
        scaled.push_back(mine.rows.narrow(0, begin, mine.per_expert[l]) * factor);
        begin += mine.per_expert[l];
      }
      const at::Tensor back = CombineFromExperts(at::cat(scaled), mine, parallel);
      const at::Tensor want = c.rows * (c.expert + 1).to(at::kFloat).unsqueeze(1);
      EXPECT_TRUE(at::equal(back, want)) << "ep " << ep << " rank " << r;
    });
  }
}

}  // namespace
}  // namespace conveyor
