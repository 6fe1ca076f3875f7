// The central runtime test: for every schedule, a pipelined step gives the loss and every
// gradient of one full-batch step in a single process, and a few SGD steps give the same
// parameters. Ranks are threads over the in-process transport here, matching messages by
// order as NCCL does; the c10d test runs the same check across processes.
#include <gtest/gtest.h>

#include "conveyor/common/error.h"
#include "conveyor/e2e/pipeline_testing.h"
#include "conveyor/schedule/registry.h"

namespace conveyor {
namespace {

constexpr uint64_t kSeed = 7;

void ExpectSame(const StepOutcome& want, const StepOutcome& got, const std::string& what) {
  EXPECT_NEAR(got.loss, want.loss, 1e-5 * std::abs(want.loss)) << what;
  ASSERT_EQ(got.grads.size(), want.grads.size()) << what;
  for (const auto& [name, grad] : want.grads) {
    ASSERT_TRUE(got.grads.count(name)) << what << ": no gradient for " << name;
    const at::Tensor& g = got.grads.at(name);
    const double scale = grad.abs().max().item<double>() + 1e-12;
    const double diff = (g - grad).abs().max().item<double>();
    EXPECT_LE(diff, 1e-4 * scale) << what << ": gradient of " << name << " differs by " << diff
                                  << " (max |grad| " << scale << ")";
  }
  for (const auto& [name, param] : want.params) {
    const double diff = (got.params.at(name) - param).abs().max().item<double>();
    EXPECT_LE(diff, 1e-5) << what << ": parameter " << name << " differs by " << diff;
  }
}

// Two steps' batches of 9 samples (uneven over 2 or 4 micro-batches), lengths 7 then 5.
std::vector<Batch> TwoBatchesOfNine(const GptConfig& config) {
  return {MakeBatch(config, 9, 7, kSeed), MakeBatch(config, 9, 5, kSeed + 1)};
}

struct Case {
  int pp;
  int m;
  int chunks;  // 0 = default
};

std::vector<Case> Cases() {
  // m < pp, m == pp, uneven splits (batch 2m+1), m not a multiple of pp.
  return {{2, 1, 0}, {2, 3, 0}, {2, 4, 0}, {4, 2, 0}, {4, 4, 0}, {4, 6, 0}, {4, 8, 0}, {2, 4, 3}};
}

class PipelineEquivalenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PipelineEquivalenceTest, MatchesFullBatchStep) {
  const std::string schedule = GetParam();
  const auto config = [] {
    auto c = SmallGpt();
    c.layers = 10;  // 12 layers in all: enough for pp 4 x v 3
    return c;
  }();
  int ran = 0;
  for (const Case& c : Cases()) {
    Program program(Layout::Loop(1, 1, 1));
    try {
      program = BuildSchedule(schedule, ScheduleOptions{c.pp, c.m, c.chunks});
    } catch (const UserError&) {
      continue;  // this schedule does not take these sizes (e.g. chunks for 1f1b)
    }
    const std::string what = schedule + " pp=" + std::to_string(c.pp) +
                             " m=" + std::to_string(c.m) +
                             " v=" + std::to_string(program.layout.chunks_per_rank());
    // Two steps, different sequence lengths, uneven micro-batches (2m + 1 samples).
    const std::vector<Batch> batches = {MakeBatch(config, 2 * c.m + 1, 7, kSeed),
                                        MakeBatch(config, 2 * c.m + 1, 5, kSeed + 1)};
    const StepOutcome want = RunReference(config, kSeed, batches, 0.1);
    const StepOutcome got = RunPipeline(program, config, kSeed, batches, 0.1);
    ExpectSame(want, got, what);
    ++ran;
  }
  EXPECT_GE(ran, 4) << schedule << " ran too few cases";
}

// Recomputation changes when activations exist, not what is computed: full (every stage
// runs its forward again before backward) and selective (attention scores only) give the
// reference's loss, gradients and parameters, with split backward (zb-h1, zb-v) too.
TEST(RecomputeEquivalenceTest, FullAndSelectiveMatchTheFullBatchStep) {
  auto config = SmallGpt();
  config.layers = 4;
  const std::vector<Batch> batches = TwoBatchesOfNine(config);
  const StepOutcome want = RunReference(config, kSeed, batches, 0.1);
  for (const std::string schedule : {"1f1b", "zb-h1", "zb-v", "interleaved-1f1b"}) {
    const Program program = BuildSchedule(schedule, ScheduleOptions{2, 4, 0});
    ExpectSame(want, RunPipeline(program, config, kSeed, batches, 0.1, /*recompute=*/true),
               schedule + " full recompute");
    auto selective = config;
    selective.recompute_attention = true;
    ExpectSame(want, RunPipeline(program, selective, kSeed, batches, 0.1),
               schedule + " selective recompute");
  }
}

// Half-precision messages: activations and input gradients crossing between stages in bf16
// or fp16 (the compute in fp32 here, so the casts are the only difference) give exactly what
// one process gives with the same casts written into the model at the stage boundaries. With
// split backward, interleaved stages (some boundaries inside one rank), the V placement,
// DualPipe and full recomputation. Both halve the bytes on the wire.
TEST(HalfPrecisionMessagesTest, EqualCastsAtTheStageBoundariesByHand) {
  auto config = SmallGpt();
  config.layers = 6;
  const std::vector<Batch> batches = TwoBatchesOfNine(config);
  const StepOutcome fp32 = RunReference(config, kSeed, batches, 0.1);
  for (const at::ScalarType dtype : {at::kBFloat16, at::kHalf}) {
    for (const std::string schedule : {"1f1b", "zb-h1", "interleaved-1f1b", "zb-v", "dualpipe"}) {
      const Program program = BuildSchedule(schedule, ScheduleOptions{2, 4, 0});
      const std::string what = schedule + " " + std::string(c10::toString(dtype)) + " messages";
      const StepOutcome want = RunReference(config, kSeed, batches, 0.1, &program.layout, dtype);
      ExpectSame(want, RunPipeline(program, config, kSeed, batches, 0.1, false, dtype), what);
      if (schedule == "1f1b") {
        ExpectSame(want, RunPipeline(program, config, kSeed, batches, 0.1, true, dtype),
                   what + ", full recompute");
      }
      // The casts are real: the rounded run is not the fp32 one.
      EXPECT_GT(std::abs(want.loss - fp32.loss), 0) << what;
    }
  }
}

std::vector<std::string> Names() {
  std::vector<std::string> names;
  for (const ScheduleInfo& info : AllSchedules()) names.emplace_back(info.name);
  return names;
}

// Losses from any stage: a term added from inside a middle stage (module/auxiliary_loss.h)
// gives, under every schedule (split backward, interleaved and V placements, DualPipe's
// paired directions), the loss, gradients and parameters of one process with the same term
// added to its loss, and with full recomputation the term counts once; its value summed over
// the ranks is the reference's.
TEST(AuxiliaryLossEquivalenceTest, ATermOnAMiddleStageMatchesOneProcessUnderEverySchedule) {
  auto config = SmallGpt();
  config.layers = 6;
  const std::vector<Batch> batches = TwoBatchesOfNine(config);
  const StepOutcome plain = RunReference(config, kSeed, batches, 0.1);
  int ran = 0;
  for (const std::string& schedule : Names()) {
    Program program(Layout::Loop(1, 1, 1));
    try {
      program = BuildSchedule(schedule, ScheduleOptions{4, 4, 0});
    } catch (const UserError&) {
      continue;
    }
    const SquareTermAt square{&program.layout, 1};  // after the second part: a middle stage
    const StepOutcome want = RunReference(config, kSeed, batches, 0.1, nullptr, at::kFloat, square);
    EXPECT_GT(std::abs(want.loss - plain.loss), 1e-6) << "the term changed the first step";
    for (bool recompute : {false, true}) {
      const std::string what = schedule + (recompute ? ", full recompute" : "");
      const StepOutcome got =
          RunPipeline(program, config, kSeed, batches, 0.1, recompute, at::kFloat, 1);
      ExpectSame(want, got, what);
      ASSERT_EQ(got.auxiliary.count("square"), 1u) << what;
      EXPECT_NEAR(got.auxiliary.at("square"), want.auxiliary.at("square"),
                  1e-5 * want.auxiliary.at("square"))
          << what;
    }
    ++ran;
  }
  EXPECT_GE(ran, 8);
}

INSTANTIATE_TEST_SUITE_P(AllSchedules, PipelineEquivalenceTest, ::testing::ValuesIn(Names()),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace conveyor
