#include "conveyor/sim/auto_planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/sim/auto_planner_testing.h"

namespace conveyor {
namespace {

AutoPlanRequest Small() {
  AutoPlanRequest r;
  r.model =
      TransformerSpec{.layers = 8, .hidden = 1024, .heads = 16, .vocab = 32000, .seq_len = 1024};
  r.world = 8;
  r.global_batch = 64;
  r.device_flops = 100e12;
  r.memory_per_rank = 80e9;
  r.network.ranks_per_node = 8;
  r.top = 50;
  return r;
}

TEST(AutoPlannerTest, TriesChunksPerRankWhereTheScheduleTakesThem) {
  AutoPlanRequest r = Small();  // 8 blocks, the embedding and the head: 10 layers
  r.world = 4;
  r.network.ranks_per_node = 4;
  r.top = 1000;
  r.schedules = {"interleaved-1f1b", "zb-v"};
  std::set<std::tuple<int, std::string, int>> seen;  // (pp, schedule, chunks)
  for (const PlanCandidate& c : PlanAuto(r).best) {
    seen.insert({c.pp, c.schedule, c.chunks});
    EXPECT_EQ(static_cast<int>(std::count(c.stage_layers.begin(), c.stage_layers.end(), ',')) + 1,
              c.pp * c.chunks);
  }
  // Up to max_chunks (4) while pp x chunks <= 10; ZB-V's two chunks are fixed.
  EXPECT_TRUE(seen.count({2, "interleaved-1f1b", 4}));
  EXPECT_TRUE(seen.count({4, "interleaved-1f1b", 2}));
  EXPECT_FALSE(seen.count({4, "interleaved-1f1b", 3}));
  EXPECT_TRUE(seen.count({2, "zb-v", 2}));
  EXPECT_FALSE(seen.count({2, "zb-v", 3}));
  EXPECT_FALSE(seen.count({1, "interleaved-1f1b", 3}));  // one rank: more chunks buy nothing
  r.max_chunks = 2;
  for (const PlanCandidate& c : PlanAuto(r).best) EXPECT_EQ(c.chunks, 2);
}

TEST(AutoPlannerTest, RanksLayoutsThatFitFastestFirst) {
  const AutoPlan plan = PlanAuto(Small());
  ASSERT_FALSE(plan.best.empty());
  EXPECT_GT(plan.layouts, 100);
  EXPECT_EQ(plan.over_memory, 0);
  for (size_t i = 0; i < plan.best.size(); ++i) {
    const PlanCandidate& c = plan.best[i];
    EXPECT_EQ(c.dp * c.tp * c.pp, 8);
    EXPECT_EQ(16 % c.tp, 0);
    EXPECT_EQ(64 % c.dp, 0);
    EXPECT_EQ(static_cast<int64_t>(c.microbatches) * c.micro_batch_size * c.dp, 64);
    EXPECT_LE(c.peak_bytes, 80e9);
    EXPECT_GT(c.mfu, 0);
    EXPECT_LE(c.mfu, 1);
    EXPECT_NEAR(c.tokens_per_s * c.step_s, 64.0 * 1024, 1e-6 * 64 * 1024);
    if (i > 0) {
      // Equal to 7 digits counts as equal (then less ZeRO and memory go first).
      EXPECT_GE(static_cast<float>(c.step_s), static_cast<float>(plan.best[i - 1].step_s));
      EXPECT_FALSE(c.held_back.empty());
    }
  }
  EXPECT_TRUE(plan.best[0].held_back.empty());
  // Recomputation only costs time: the fastest plan does not recompute when all fits.
  EXPECT_EQ(plan.best[0].recompute, Recompute::kNone);
}

// A world of 2 and 2 blocks (4 layers with the embedding and the head), a batch of 4: every
// layout, in the order the planner tries them.
TEST(AutoPlannerTest, EnumeratesEveryLayoutInOrder) {
  AutoPlanRequest r = Small();
  r.model.layers = 2;
  r.world = 2;
  r.network.ranks_per_node = 2;
  r.global_batch = 4;
  r.max_microbatches = 4;
  r.schedules = {"1f1b", "interleaved-1f1b"};
  using Row = std::tuple<int, int, int, std::string, int, int, int64_t>;
  std::vector<Row> seen;  // (dp, tp, pp, schedule, chunks, micro-batches, their size)
  const int64_t visited = ForEachPlanLayout(r, [&](const PlanLayout& l) {
    seen.emplace_back(l.dp, l.tp, l.pp, std::string(l.schedule), l.chunks, l.microbatches,
                      l.micro_batch_size);
    EXPECT_EQ(l.program.layout.num_ranks(), l.pp);
    EXPECT_EQ(l.program.layout.num_stages(), l.pp * l.chunks);
  });
  const std::vector<Row> expected = {
      {2, 1, 1, "1f1b", 1, 1, 2},  // pp 1: the first schedule only
      {2, 1, 1, "1f1b", 1, 2, 1},
      {1, 1, 2, "1f1b", 1, 1, 4},
      {1, 1, 2, "1f1b", 1, 2, 2},
      {1, 1, 2, "1f1b", 1, 4, 1},
      {1, 1, 2, "interleaved-1f1b", 2, 1, 4},  // 3 chunks: 6 parts, 4 layers
      {1, 1, 2, "interleaved-1f1b", 2, 2, 2},
      {1, 1, 2, "interleaved-1f1b", 2, 4, 1},
      {1, 2, 1, "1f1b", 1, 1, 4},
      {1, 2, 1, "1f1b", 1, 2, 2},
      {1, 2, 1, "1f1b", 1, 4, 1},
  };
  EXPECT_EQ(seen, expected);
  EXPECT_EQ(visited, 11);
  EXPECT_EQ(PlanAuto(r).layouts, visited);
  // The request's sizes, where set, hold.
  r.pp = 2;
  ForEachPlanLayout(r, [&](const PlanLayout& l) { EXPECT_EQ(l.pp, 2); });
  EXPECT_EQ(PlannedRecomputes(r), (std::vector<Recompute>{Recompute::kNone, Recompute::kFull}));
  r.schedules = {"no-such-schedule"};
  EXPECT_THROW(ForEachPlanLayout(r, [](const PlanLayout&) {}), UserError);
}

// Pricing one layout under one recomputation gives what the whole plan says of it.
TEST(AutoPlannerTest, PricesOneCandidateAsThePlanDoes) {
  AutoPlanRequest r = Small();
  r.world = 4;
  r.network.ranks_per_node = 4;
  r.top = 100000;
  const AutoPlan plan = PlanAuto(r);
  ASSERT_EQ(plan.over_memory, 0);
  std::map<std::tuple<int, int, std::string, int, int, Recompute, bool>, PlanCandidate> by_layout;
  for (const PlanCandidate& c : plan.best) {
    by_layout[{c.tp, c.pp, c.schedule, c.chunks, c.microbatches, c.recompute,
               c.sequence_parallel}] = c;
  }
  CandidatePricer pricer(r);
  int64_t priced = 0;
  ForEachPlanLayout(r, [&](const PlanLayout& l) {
    for (Recompute recompute : PlannedRecomputes(r)) {
      for (bool sequence_parallel : {false, true}) {  // none and full; with tp > 1 each twice
        if (sequence_parallel && l.tp == 1) break;
        const PricedCandidate p = pricer.Price(l, recompute, sequence_parallel);
        ASSERT_TRUE(p.fits);
        const PlanCandidate& want = by_layout.at({l.tp, l.pp, std::string(l.schedule), l.chunks,
                                                  l.microbatches, recompute, sequence_parallel});
        EXPECT_EQ(p.candidate.dp, want.dp);
        EXPECT_EQ(p.candidate.micro_batch_size, want.micro_batch_size);
        EXPECT_EQ(p.candidate.stage_layers, want.stage_layers);
        EXPECT_EQ(p.candidate.zero, want.zero);
        EXPECT_EQ(p.candidate.step_s, want.step_s);
        EXPECT_EQ(p.candidate.peak_bytes, want.peak_bytes);
        EXPECT_EQ(p.candidate.bubble, want.bubble);
        EXPECT_EQ(p.candidate.mfu, want.mfu);
        EXPECT_EQ(p.candidate.tp_comm_s, want.tp_comm_s);
        EXPECT_EQ(p.candidate.dp_exposed_s, want.dp_exposed_s);
        EXPECT_TRUE(p.candidate.held_back.empty());
        ++priced;
      }
    }
  });
  EXPECT_EQ(priced, static_cast<int64_t>(plan.best.size()));
  EXPECT_GT(priced, plan.layouts * 2);
  // Over the limit: the peak, not simulated.
  r.memory_per_rank = 1e6;
  CandidatePricer tight(r);
  ForEachPlanLayout(r, [&](const PlanLayout& l) {
    const PricedCandidate p = tight.Price(l, Recompute::kFull);
    EXPECT_FALSE(p.fits);
    EXPECT_GT(p.candidate.peak_bytes, 1e6);
    EXPECT_EQ(p.candidate.step_s, 0);
  });
}

// The fastest layout needs more memory than the cap: the planner picks another, which fits.
TEST(AutoPlannerTest, AMemoryCapBelowTheFastestNeedPicksAnotherThatFits) {
  AutoPlanRequest r = Small();
  const PlanCandidate fastest = PlanAuto(r).best[0];
  r.memory_per_rank = fastest.peak_bytes * 0.8;
  const AutoPlan capped = PlanAuto(r);
  ASSERT_FALSE(capped.best.empty());
  EXPECT_GT(capped.over_memory, 0);
  for (const PlanCandidate& c : capped.best) EXPECT_LE(c.peak_bytes, r.memory_per_rank);
  EXPECT_GE(capped.best[0].step_s, fastest.step_s);
  // A cap nothing fits under: no plan, and the nearest miss is said.
  r.memory_per_rank = 1e6;
  const AutoPlan none = PlanAuto(r);
  EXPECT_TRUE(none.best.empty());
  EXPECT_GT(none.smallest_over.peak_bytes, 1e6);
}

// Sequence parallelism holds a block's 34 parts over tp where 10 stay whole without it, for
// half again the backward's TP traffic: lighter and slower. The planner takes it where only it
// fits, and says so.
TEST(AutoPlannerTest, SequenceParallelismIsLighterAndChosenWhereOnlyItFits) {
  AutoPlanRequest r = Small();
  r.tp = 4;
  r.pp = 2;
  r.schedules = {"1f1b"};
  r.network.intra = Link{1e-5, 50e9};  // a slow link: the TP traffic shows in the step
  CandidatePricer pricer(r);
  std::optional<PlanLayout> first;
  ForEachPlanLayout(r, [&](const PlanLayout& l) {
    if (!first) first = l;
  });
  ASSERT_TRUE(first.has_value());
  const PlanCandidate plain = pricer.Price(*first, Recompute::kNone).candidate;
  const PlanCandidate split = pricer.Price(*first, Recompute::kNone, true).candidate;
  EXPECT_TRUE(split.sequence_parallel);
  EXPECT_LT(split.peak_bytes, plain.peak_bytes);
  EXPECT_GT(split.step_s, plain.step_s);
  EXPECT_EQ(MeshSizes(split), "1 x 4 x 2, sp");
  // Under a cap between the two, the plan keeps that layout with sequence parallelism only,
  // and says what it costs beside a faster one.
  r.memory_per_rank = (split.peak_bytes + plain.peak_bytes) / 2;
  r.top = 100000;
  const AutoPlan plan = PlanAuto(r);
  int kept = 0;
  for (const PlanCandidate& c : plan.best) {
    if (c.microbatches != first->microbatches || c.recompute != Recompute::kNone) continue;
    EXPECT_TRUE(c.sequence_parallel) << MeshSizes(c);
    if (&c != &plan.best[0]) {
      EXPECT_NE(c.held_back.find("sequence parallel"), std::string::npos);
    }
    ++kept;
  }
  EXPECT_EQ(kept, 1);
}

// Context parallelism: a rank computes and holds a cp-th of every sequence; it is tried only
// for a model that splits its sequences, and taken where the activations fit no other way.
TEST(AutoPlannerTest, ContextParallelismHoldsAShareOfEachSequenceAndFitsLongOnes) {
  AutoPlanRequest r = Small();
  r.model.seq_len = 16384;
  r.model.gated_mlp = true;
  r.global_batch = 8;
  r.top = 100000;
  int with_cp = 0;
  ForEachPlanLayout(r, [&](const PlanLayout& l) { with_cp += l.cp > 1; });
  EXPECT_EQ(with_cp, 0);  // not asked
  r.context_parallel = true;
  r.tp = 1;
  r.pp = 1;
  r.schedules = {"1f1b"};
  std::set<int> cps;
  ForEachPlanLayout(r, [&](const PlanLayout& l) {
    cps.insert(l.cp);
    EXPECT_EQ(l.dp * l.cp, 8);
  });
  EXPECT_EQ(cps, (std::set<int>{1, 2, 4, 8}));
  CandidatePricer pricer(r);
  std::map<int, PlanCandidate> by_cp;  // one micro-batch of one sequence each
  ForEachPlanLayout(r, [&](const PlanLayout& l) {
    if (l.micro_batch_size == 1) by_cp[l.cp] = pricer.Price(l, Recompute::kNone).candidate;
  });
  ASSERT_EQ(by_cp.size(), 4u);
  EXPECT_LT(by_cp.at(2).peak_bytes, by_cp.at(1).peak_bytes);
  EXPECT_LT(by_cp.at(8).peak_bytes, by_cp.at(2).peak_bytes);
  EXPECT_GT(by_cp.at(2).cp_comm_s, 0);
  EXPECT_EQ(by_cp.at(1).cp_comm_s, 0);
  EXPECT_EQ(MeshSizes(by_cp.at(2)), "4 x 1 x 1, cp 2");
  // A cap that only a split sequence fits under.
  r.memory_per_rank = (by_cp.at(2).peak_bytes + by_cp.at(1).peak_bytes) / 2;
  const AutoPlan plan = PlanAuto(r);
  ASSERT_FALSE(plan.best.empty());
  for (const PlanCandidate& c : plan.best) {
    if (c.recompute == Recompute::kNone && c.micro_batch_size == 1) EXPECT_GT(c.cp, 1);
  }
}

TEST(AutoPlannerTest, MeasuredCostsSplitByTimeAndOfferSelectiveRecomputation) {
  const LayerCostTable table = MeasuredTestTable();
  const LayerSample two = table.At(table.block, 2);
  EXPECT_DOUBLE_EQ(two.forward_s, 2e-3);
  EXPECT_DOUBLE_EQ(two.activation_bytes, 2e6);
  EXPECT_DOUBLE_EQ(table.At(table.block, 0.5).forward_s, 0.5e-3);  // beyond, on the line
  AutoPlanRequest r = MeasuredRequest(table, 2, 8);
  r.memory_per_rank = 1e9;
  r.pp = 2;
  AutoPlan plan = PlanAuto(r);
  ASSERT_FALSE(plan.best.empty());
  bool selective = false;
  for (const PlanCandidate& c : plan.best) {
    EXPECT_EQ(c.pp, 2) << "--pp fixes the pipeline";
    EXPECT_LT(c.mfu, 0) << "no MFU without device figures";
    selective |= c.recompute == Recompute::kSelective;
    if (c.schedule == "1f1b" && c.recompute == Recompute::kNone) {
      // 8 layers (6 blocks, embedding, head) in two parts of equal work: the embedding
      // and three blocks, three blocks and the head.
      EXPECT_EQ(c.stage_layers, "4,4");
    }
  }
  EXPECT_TRUE(selective);
  EXPECT_EQ(plan.best[0].recompute, Recompute::kNone) << "recomputation costs time";
  // Under a cap only recomputation meets, it is chosen.
  const PlanCandidate fastest = plan.best[0];
  r.memory_per_rank = fastest.peak_bytes * 0.7;
  plan = PlanAuto(r);
  ASSERT_FALSE(plan.best.empty());
  EXPECT_LE(plan.best[0].peak_bytes, r.memory_per_rank);
  EXPECT_GT(plan.best[0].step_s, fastest.step_s);
}

// The reducer copies a bucket of gradients after the backward, when the activations are
// gone: a DP replica needs no more memory than the same run alone while that copy is the
// smaller, and every layout of the table fits what the same run alone needs plus it.
TEST(AutoPlannerTest, DataParallelBucketsTakeNoMemoryBesideTheActivations) {
  AutoPlanRequest r = MeasuredRequest(MeasuredTestTable(), 1, 4);
  r.pp = 1;
  r.schedules = {"naive"};
  const AutoPlan alone = PlanAuto(r);
  r.world = 2;
  r.global_batch = 8;
  const AutoPlan replicas = PlanAuto(r);
  int compared = 0;
  for (const PlanCandidate& a : alone.best) {
    for (const PlanCandidate& b : replicas.best) {
      if (b.dp != 2 || b.microbatches != a.microbatches || b.recompute != a.recompute ||
          b.zero != 0) {
        continue;
      }
      EXPECT_DOUBLE_EQ(b.peak_bytes, a.peak_bytes)
          << a.microbatches << " " << RecomputeName(a.recompute);
      ++compared;
    }
  }
  EXPECT_GE(compared, 3);
}

// Ranks as threads on one GPU share it at the capacity its profile measured: at 1.2 ranks'
// work, a pipeline of 4 runs far slower than on 4 GPUs. A table measured on the CPU cannot
// say how a GPU is shared.
TEST(AutoPlannerTest, RanksSharingOneGpuRunAtTheCapacityMeasuredThere) {
  AutoPlanRequest r = MeasuredRequest(MeasuredTestTable(), 4, 8);
  r.schedules = {"1f1b"};
  r.measured->device = "cpu";
  EXPECT_THROW(ShareOneGpu(r), UserError);
  r.measured->device = "cuda";
  r.measured->capacity = {{1.2}, {1.2}};
  r.measured->capacity_ranks = 4;
  r.tp = 2;
  EXPECT_THROW(ShareOneGpu(r), UserError) << "tensor-parallel threads on one GPU deadlock";
  r.tp = 0;
  const double own = PlanAuto(r).best.at(0).step_s;
  ShareOneGpu(r);
  EXPECT_DOUBLE_EQ(r.shared_compute, 1.2);
  EXPECT_EQ(r.network.intra, LocalGpuLink());
  for (const PlanCandidate& c : PlanAuto(r).best) EXPECT_EQ(c.tp, 1) << "TP would deadlock";
  EXPECT_GT(PlanAuto(r).best.at(0).step_s, 1.5 * own);
}

// The capacity of ranks sharing a device is measured at each micro-batch size (a GPU idles
// between the small kernels of small micro-batches, which other ranks' kernels fill):
// between sizes on the line, beyond them the nearest, and a plan of micro-batches of 1 runs
// at the capacity there.
TEST(AutoPlannerTest, SharedCapacityFollowsTheMicroBatchSize) {
  LayerCostTable t = MeasuredTestTable();  // sizes 1 and 3
  t.device = "cuda";
  t.capacity = {{2.0}, {1.2}};
  EXPECT_DOUBLE_EQ(t.CapacityAt(0.5, 1), 2.0);
  EXPECT_DOUBLE_EQ(t.CapacityAt(1, 1), 2.0);
  EXPECT_DOUBLE_EQ(t.CapacityAt(2, 1), 1.6);
  EXPECT_DOUBLE_EQ(t.CapacityAt(3, 1), 1.2);
  EXPECT_DOUBLE_EQ(t.CapacityAt(16, 4), 1.2);
  AutoPlanRequest r = MeasuredRequest(t, 2, 8);  // 4 sequences a replica
  r.dp = 2;
  r.max_microbatches = 4;
  ShareOneGpu(r);
  auto step_at = [](const AutoPlanRequest& request, int microbatches) {
    for (const PlanCandidate& c : PlanAuto(request).best) {
      if (c.microbatches == microbatches && c.recompute == Recompute::kNone && c.zero == 0)
        return c.step_s;
    }
    return -1.0;
  };
  const double varying = step_at(r, 4);  // micro-batches of 1 sequence: capacity 2
  r.measured->capacity = {{1.2}, {1.2}};
  const double flat = step_at(r, 4);
  ASSERT_GT(varying, 0);
  EXPECT_LT(varying, 0.8 * flat);
}

// More ranks than cores take turns, and each count of busy ranks has the capacity measured
// for it: a pipeline that runs one rank at a time (naive, one micro-batch) is predicted at
// the rate of one busy rank of the four, however fast all four together run.
TEST(AutoPlannerTest, RanksTakingTurnsRunAtTheCapacityMeasuredForEachBusyCount) {
  LayerCostTable t = MeasuredTestTable();  // sizes 1 and 3
  t.cores = 2;
  t.capacity_ranks = 4;
  t.capacity = {{1.0, 1.6, 1.6, 1.6}, {0.6, 1.2, 1.6, 1.6}};
  EXPECT_DOUBLE_EQ(t.CapacityAt(2, 1), 0.8);
  EXPECT_DOUBLE_EQ(t.CapacityAt(3, 2), 1.2);
  EXPECT_DOUBLE_EQ(t.CapacityAt(3, 9), 1.6);  // more busy than measured: all of them
  EXPECT_DOUBLE_EQ(t.FullCapacity(), 1.6);
  AutoPlanRequest r = MeasuredRequest(t, 4, 1);
  r.pp = 4;
  r.schedules = {"naive"};
  ShareOneCpu(r, 2);
  EXPECT_DOUBLE_EQ(r.shared_compute, 1.6);
  auto naive_step = [](const AutoPlanRequest& request) {
    for (const PlanCandidate& c : PlanAuto(request).best) {
      if (c.recompute == Recompute::kNone && c.zero == 0) return c.step_s;
    }
    return -1.0;
  };
  const double alone = naive_step(r);
  r.measured->capacity = {{0.5, 1.6, 1.6, 1.6}, {0.5, 1.2, 1.6, 1.6}};
  const double taking_turns = naive_step(r);
  ASSERT_GT(alone, 0);
  EXPECT_GT(taking_turns, 1.5 * alone);
}

// The step's end (norm, clip, AdamW) runs on every rank at once: on shared cores, at the rate
// of all of them busy.
TEST(AutoPlannerTest, TheStepsEndRunsEveryRankAtOnceOnSharedCores) {
  // What 1 us a parameter of the step's end adds to naive's step (one micro-batch: one rank
  // busy at a time in the pipeline) where 4 busy ranks do `all_busy` ranks' worth.
  auto added_by_optimizer = [](double all_busy) {
    LayerCostTable t = MeasuredTestTable();
    t.cores = 2;
    t.capacity_ranks = 4;
    t.capacity = {{1.0, 1.6, 1.6, all_busy}, {1.0, 1.6, 1.6, all_busy}};
    auto step = [&](double optimizer_s) {
      t.optimizer_s = optimizer_s;
      AutoPlanRequest r = MeasuredRequest(t, 4, 1);
      r.pp = 4;
      r.schedules = {"naive"};
      ShareOneCpu(r, 2);
      for (const PlanCandidate& c : PlanAuto(r).best) {
        if (c.recompute == Recompute::kNone && c.zero == 0 && c.microbatches == 1) return c.step_s;
      }
      return -1.0;
    };
    return step(1e-6) - step(0);
  };
  const double slow = added_by_optimizer(1.6);  // each of 4 at 0.4
  ASSERT_GT(slow, 0);
  EXPECT_NEAR(slow / added_by_optimizer(3.2), 2.0, 1e-6);  // each at 0.8
}

TEST(AutoPlannerTest, TensorParallelismStaysInsideANode) {
  AutoPlanRequest r = Small();
  r.world = 16;
  r.network.ranks_per_node = 4;
  for (const PlanCandidate& c : PlanAuto(r).best) EXPECT_LE(c.tp, 4);
}

// A TP size splits every part of a block: a Llama whose MLP units do not divide by 2 gets no
// tp 2 candidate, though its heads do (the trainer's --tp refuses it too).
TEST(AutoPlannerTest, TensorParallelSizesSplitEveryPartOfABlock) {
  TransformerSpec m{
      .layers = 4, .hidden = 64, .heads = 4, .kv_heads = 2, .intermediate = 171, .gated_mlp = true};
  EXPECT_FALSE(m.SplitsOver(2));
  m.intermediate = 172;
  EXPECT_TRUE(m.SplitsOver(2));
  EXPECT_FALSE(m.SplitsOver(4)) << "2 key-value heads";
  AutoPlanRequest r = Small();
  r.model = m;
  r.world = 2;
  r.network.ranks_per_node = 2;
  r.tp = 2;
  EXPECT_FALSE(PlanAuto(r).best.empty());
  r.model.intermediate = 171;
  EXPECT_THROW(PlanAuto(r), UserError) << "no layout with tp 2";
}

// 8 sparse blocks of 8 experts, top 2, on 8 ranks of one node.
AutoPlanRequest Experts() {
  AutoPlanRequest r = Small();
  r.model.gated_mlp = true;
  r.model.experts = 8;
  r.model.top_k = 2;
  r.model.expert_units = 1024;
  return r;
}

TEST(AutoPlannerTest, SpreadsTheExpertsOverDataParallelRanksThatDivideThem) {
  AutoPlanRequest r = Experts();
  std::set<std::pair<int, int>> seen;  // (dp, ep)
  ForEachPlanLayout(r, [&](const PlanLayout& l) {
    EXPECT_EQ(l.tp, 1) << "experts at tp 1";
    EXPECT_EQ(l.dp % l.ep, 0);
    seen.insert({l.dp, l.ep});
  });
  EXPECT_EQ(seen,
            (std::set<std::pair<int, int>>{
                {1, 1}, {2, 1}, {2, 2}, {4, 1}, {4, 2}, {4, 4}, {8, 1}, {8, 2}, {8, 4}, {8, 8}}));
  r.model.experts = 6;  // ep divides the experts too
  seen.clear();
  ForEachPlanLayout(r, [&](const PlanLayout& l) { seen.insert({l.dp, l.ep}); });
  EXPECT_FALSE(seen.count({4, 4}));
  EXPECT_TRUE(seen.count({8, 2}));
  r.ep = 2;  // as told
  ForEachPlanLayout(r, [&](const PlanLayout& l) { EXPECT_EQ(l.ep, 2); });
  // A dense model: ep 1 only.
  ForEachPlanLayout(Small(), [&](const PlanLayout& l) { EXPECT_EQ(l.ep, 1); });
}

TEST(AutoPlannerTest, ExpertParallelismDividesTheExpertsMemoryAndPaysTheirAllToAlls) {
  AutoPlanRequest r = Experts();
  r.dp = 8;
  r.schedules = {"1f1b"};
  r.network.intra = Link{5e-6, 10e9};
  const AutoPlan plan = PlanAuto(r);
  std::map<int, PlanCandidate> by_ep;  // pp 1, no recomputation, 1 micro-batch
  for (const PlanCandidate& c : plan.best) {
    if (c.recompute == Recompute::kNone && c.microbatches == 1) by_ep[c.ep] = c;
  }
  ASSERT_EQ(by_ep.size(), 4u);
  const TransformerSpec& m = r.model;
  for (int ep : {2, 4, 8}) {
    const PlanCandidate& c = by_ep.at(ep);
    // The experts' weights, gradients and moments (16 bytes a parameter) over ep.
    EXPECT_NEAR(by_ep.at(1).peak_bytes - c.peak_bytes, 8 * m.ExpertParams() * 16 * (1 - 1.0 / ep),
                1e-6 * c.peak_bytes)
        << "ep " << ep;
    // 8 sparse blocks: a forward's counts and two all-to-alls of 8 x 1024 x 2 x 1024 x 2
    // bytes, a backward's two, for each of the 8 sequences of the replica.
    const double rows = 8.0 * 1024 * 2 * 1024 * 2;
    const double one = AllToAllTime(ep, rows, r.network.intra);
    const double counts = AllToAllTime(ep, 8 * 8, r.network.intra);
    EXPECT_NEAR(c.ep_comm_s, 8 * (counts + 4 * one), 1e-9) << "ep " << ep;
  }
  EXPECT_EQ(by_ep.at(1).ep_comm_s, 0);
  // Under a memory cap that only ep 4 or more meets (recomputing, ZeRO-1), it is chosen.
  std::map<int, double> least;  // by ep, the smallest need of any layout
  r.memory_per_rank = 1;        // nothing fits: each priced at its least (ZeRO-1)
  CandidatePricer pricer(r);
  ForEachPlanLayout(r, [&](const PlanLayout& l) {
    for (Recompute recompute : PlannedRecomputes(r)) {
      const double need = pricer.Price(l, recompute).candidate.peak_bytes;
      least[l.ep] = least.count(l.ep) ? std::min(least[l.ep], need) : need;
    }
  });
  ASSERT_LT(least.at(4), least.at(2));
  r.memory_per_rank = (least.at(2) + least.at(4)) / 2;
  const AutoPlan capped = PlanAuto(r);
  ASSERT_FALSE(capped.best.empty());
  for (const PlanCandidate& c : capped.best) EXPECT_GE(c.ep, 4) << MeshSizes(c);
  EXPECT_EQ(MeshSizes(capped.best[0]), "8 x 1 x 1, ep " + std::to_string(capped.best[0].ep));
}

TEST(AutoPlannerTest, DualPipePairsAtOnceHideTheAllToAllsOnDevicesOfTheirOwn) {
  AutoPlanRequest r = Experts();
  r.world = 4;
  r.network.ranks_per_node = 4;
  r.network.intra = Link{5e-6, 5e9};
  r.dp = 2;
  r.ep = 2;
  r.pp = 2;
  r.schedules = {"dualpipe-v"};
  auto step = [&](bool at_once) {
    r.pairs_at_once = at_once;
    const AutoPlan plan = PlanAuto(r);
    EXPECT_FALSE(plan.best.empty());
    double best = 1e30;
    for (const PlanCandidate& c : plan.best) {
      if (c.recompute == Recompute::kNone && c.microbatches == 8) best = std::min(best, c.step_s);
    }
    return best;
  };
  const double in_turn = step(false), at_once = step(true);
  EXPECT_LT(at_once, in_turn);
  // Ranks sharing one machine's 2 cores: the all-to-alls' copies are work there, nothing hides.
  ShareOneCpu(r, 2);
  EXPECT_NEAR(step(true), step(false), 1e-12 * step(false));
}

TEST(AutoPlannerTest, RefusesWhatCannotBePlannedNamingIt) {
  AutoPlanRequest r = Small();
  r.world = 0;
  EXPECT_THROW(PlanAuto(r), UserError);
  r = Small();
  r.model.heads = 7;
  EXPECT_THROW(PlanAuto(r), UserError);
  r = Small();
  r.schedules = {"no-such"};
  EXPECT_THROW(PlanAuto(r), UserError);
  r = Small();
  r.network.ranks_per_node = 3;
  EXPECT_THROW(PlanAuto(r), UserError);
}

}  // namespace
}  // namespace conveyor
