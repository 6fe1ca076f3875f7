#include "conveyor/runtime/executor.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <functional>

#include "conveyor/comm/local_transport.h"
#include "conveyor/comm/rank_threads.h"
#include "conveyor/runtime/pipeline_rank.h"
#include "conveyor/runtime/synthetic_stage.h"
#include "conveyor/schedule/lower.h"
#include "conveyor/schedule/program_testing.h"
#include "conveyor/schedule/registry.h"

namespace conveyor {
namespace {

MakeStageModule Synthetic() {
  return [](int stage) { return MakeSyntheticStage(stage, SyntheticCosts{}); };
}

std::vector<MicroBatch> Microbatches(int n, int m) {
  Batch batch;
  batch.inputs = at::ones({n, 2}, at::kLong);
  batch.targets = at::zeros({n, 2}, at::kLong);
  return SplitBatch(batch, m);
}

TEST(ExecutorTest, ProgramMustFitTheWorld) {
  const Program program = Lower(BuildSchedule("1f1b", ScheduleOptions{4, 4, 0}));
  auto world = LocalWorld(2);
  try {
    PipelineRank rank(program, 1, world[1].get(), Synthetic(), at::kFloat);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("the program needs 4 ranks"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(PipelineRank(program, 4, nullptr, Synthetic(), at::kFloat), UserError);
  // Communication without a transport.
  EXPECT_THROW(PipelineRank(program, 0, nullptr, Synthetic(), at::kFloat), UserError);
}

TEST(ExecutorTest, StepNeedsTheProgramsMicrobatches) {
  const Program program = Lower(BuildSchedule("gpipe", ScheduleOptions{1, 3, 0}));
  PipelineRank rank(program, 0, nullptr, Synthetic(), at::kFloat);
  EXPECT_THROW(rank.Step(Microbatches(4, 2)), UserError);
  EXPECT_NO_THROW(rank.Step(Microbatches(4, 3)));
}

// A module y = x * w, loss sum(y); its forward of micro-batch `fail_at` throws.
class Scale : public StageModule {
 public:
  explicit Scale(int fail_at = -1) : fail_at_(fail_at) {}
  at::Tensor Forward(const at::Tensor& input, const MicroBatch& mb) override {
    if (mb.index == fail_at_) throw std::runtime_error("boom");
    return input.to(at::kFloat).unsqueeze(-1) * weight_;
  }
  at::Tensor LossSum(const at::Tensor& output, const MicroBatch&) override { return output.sum(); }
  NamedTensors NamedParameters() override { return {{"w", weight_}}; }
  std::vector<int64_t> InputShape(const MicroBatch& mb) const override {
    return {mb.size(), mb.seq_len(), 1};
  }
  std::vector<int64_t> OutputShape(const MicroBatch& mb) const override { return InputShape(mb); }

 private:
  int fail_at_;
  at::Tensor weight_ = at::ones({1}).requires_grad_(true);
};

// The hook runs once per stage, when the stage's gradient is already the step's final one.
TEST(ExecutorTest, ReduceGradHookSeesFinalGradients) {
  const Program program =
      WithGradReductions(Lower(BuildSchedule("gpipe", ScheduleOptions{1, 3, 0})));
  PipelineRank rank(
      program, 0, nullptr, [](int) { return std::make_unique<Scale>(); }, at::kFloat);
  std::vector<std::pair<int, at::Tensor>> seen;
  rank.executor().set_reduce_grad_hook([&](Stage& stage) {
    seen.emplace_back(stage.index(), stage.module().NamedParameters()[0].second.grad().clone());
  });
  rank.Step(Microbatches(6, 3));
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].first, 0);
  const at::Tensor final_grad = rank.stages().at(0)->module().NamedParameters()[0].second.grad();
  EXPECT_TRUE(at::equal(seen[0].second, final_grad));
  EXPECT_GT(final_grad.item<float>(), 0);
}

TEST(ExecutorTest, ErrorsNameRankStageMicrobatchAndAction) {
  const Program program = Lower(BuildSchedule("gpipe", ScheduleOptions{1, 2, 0}));
  PipelineRank rank(
      program, 0, nullptr, [](int) { return std::make_unique<Scale>(/*fail_at=*/1); }, at::kFloat);
  try {
    rank.Step(Microbatches(2, 2));
    FAIL();
  } catch (const StepError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0, stage 0, micro-batch 1, action 0F1: boom"),
              std::string::npos)
        << e.what();
  }
}

// Context is added, the kind kept: a user's error stays a UserError and a broken invariant an
// InternalError; only foreign errors become StepError, with their first line.
TEST(ExecutorTest, ErrorsKeepTheirKind) {
  const Program program = Lower(BuildSchedule("gpipe", ScheduleOptions{1, 2, 0}));
  auto step_throwing = [&](std::function<void()> thrower) {
    class Throwing : public Scale {
     public:
      explicit Throwing(std::function<void()> t) : thrower_(std::move(t)) {}
      at::Tensor Forward(const at::Tensor& input, const MicroBatch& mb) override {
        thrower_();
        return Scale::Forward(input, mb);
      }

     private:
      std::function<void()> thrower_;
    };
    PipelineRank rank(
        program, 0, nullptr, [&](int) { return std::make_unique<Throwing>(thrower); }, at::kFloat);
    rank.Step(Microbatches(2, 2));
  };
  EXPECT_THROW(step_throwing([] { throw UserError("bad input"); }), UserError);
  EXPECT_THROW(step_throwing([] { throw InternalError("broken"); }), InternalError);
  try {
    step_throwing([] { throw std::runtime_error("kernel failed\nbacktrace frame #0"); });
    FAIL();
  } catch (const StepError& e) {
    EXPECT_EQ(std::string(e.what()), "rank 0, stage 0, micro-batch 0, action 0F0: kernel failed");
  }
}

TEST(ExecutorTest, SplitBackwardDefersWeightWorkUntilW) {
  // One rank, two stages (loop placement, v = 2): I then W, and a direct hand-off.
  const Program program = Lower(MakeProgram(Layout::Loop(1, 2, 1), {"0F0 1F0 1I0 0I0 0W0 1W0"}));
  PipelineRank rank(program, 0, nullptr, Synthetic(), at::kFloat);
  std::vector<std::string> seen;
  Stage& last = *rank.stages().at(1);
  rank.executor().set_hook([&](const Span& span) {
    const Action& a = span.action;
    EXPECT_EQ(span.kind, SpanKind::kRun);
    if (a.op == Op::kBackwardInput && a.stage == 1) {
      EXPECT_EQ(last.pending_weight_work(), 1u);
      EXPECT_EQ(last.held(), 0u);
    }
    if (a.op == Op::kBackwardWeight && a.stage == 1) {
      EXPECT_EQ(last.pending_weight_work(), 0u);
    }
    seen.push_back(a.ToString());
  });
  rank.Step(Microbatches(1, 1));
  EXPECT_EQ(seen, (std::vector<std::string>{"0F0", "1F0", "1I0", "0I0", "0W0", "1W0"}));
  const StepStats& stats = rank.executor().last_stats();
  EXPECT_GT(stats.compute_s, 0);
  EXPECT_EQ(stats.comm_wait_s, 0);  // one rank: nothing to wait for
  EXPECT_LE(stats.compute_s, stats.seconds);
  for (const auto& [name, p] : rank.NamedParameters()) {
    EXPECT_TRUE(p.grad().defined()) << name;
  }
}

TEST(ExecutorTest, HookSeesComputesPostsAndWaitsThatAddUpToTheStats) {
  // Two ranks as threads, DualPipeV: forward and backward messages both ways, OVERLAP_F_B.
  const Program program = Lower(BuildSchedule("dualpipe-v", ScheduleOptions{2, 4, 0}));
  auto world = LocalWorld(2);
  std::vector<std::vector<Span>> spans(2);
  std::vector<StepStats> stats(2);
  RunRankThreads(world, [&](int r) {
    PipelineRank rank(program, r, world[r].get(), Synthetic(), at::kFloat);
    rank.executor().set_hook([&, r](const Span& s) { spans[r].push_back(s); });
    rank.Step(Microbatches(8, 4));
    stats[r] = rank.executor().last_stats();
  });
  for (int r = 0; r < 2; ++r) {
    double by_kind[3] = {0, 0, 0};
    int posts = 0, computes = 0, sends = 0, comms = 0, units = 0;
    for (const Action& a : program.ranks[r]) {
      comms += IsComm(a.op);
      sends += a.op == Op::kSendF || a.op == Op::kSendB;
      units += a.op == Op::kOverlapFB ? 2 : IsCompute(a.op);
    }
    for (const Span& s : spans[r]) {
      EXPECT_EQ(s.rank, r);
      EXPECT_LE(s.start, s.end) << SpanName(s);
      by_kind[static_cast<int>(s.kind)] += s.end - s.start;
      posts += s.kind == SpanKind::kPost;
      computes += s.kind == SpanKind::kRun;
      EXPECT_EQ(s.kind == SpanKind::kRun, IsCompute(s.action.op)) << SpanName(s);
    }
    EXPECT_EQ(posts, comms) << "rank " << r;
    EXPECT_EQ(computes, units) << "rank " << r;  // an OVERLAP_F_B shows as its two halves
    EXPECT_NEAR(by_kind[0], stats[r].compute_s, 1e-9);
    EXPECT_NEAR(by_kind[1], stats[r].post_s, 1e-9);
    EXPECT_NEAR(by_kind[2], stats[r].comm_wait_s, 1e-9);
    // Synthetic stages exchange (samples, T, 1) floats: 2 samples of 2 tokens per micro-batch.
    EXPECT_EQ(stats[r].sent_bytes, sends * 2 * 2 * 4) << "rank " << r;
  }
}

}  // namespace
}  // namespace conveyor
