// The classic schedules' published closed forms, reproduced by the simulator with uniform
// per-stage costs F = I = W = 1 (B = I + W = 2) and zero communication.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "conveyor/schedule/builders/1f1b.h"
#include "conveyor/schedule/builders/gpipe.h"
#include "conveyor/schedule/builders/interleaved_1f1b.h"
#include "conveyor/schedule/builders/looped_bfs.h"
#include "conveyor/schedule/builders/naive.h"
#include "conveyor/schedule/builders/zb_h1.h"
#include "conveyor/sim/simulator.h"

namespace conveyor {
namespace {

struct ClosedForm {
  std::string name;
  std::function<Program(const ScheduleOptions&)> build;
  bool takes_chunks;
  std::function<double(int p, int m, int v)> makespan;
  std::function<double(int p, int m, int v)> rank0_peak;  // in micro-batch activations
};

// Makespan of a one-directional loop pipeline in units of F + B = 3: v max(m, p) +
// min(m, p) - 1 slots. With m >= p it is the published (F + B)(vm + p - 1); with m < p the
// ring never fills and every one of the vp stages is a pipeline stage of its own.
double LoopMakespan(int p, int m, int v) { return 3.0 * (v * std::max(m, p) + std::min(m, p) - 1); }

const std::vector<ClosedForm>& Table() {
  static const auto* table = new std::vector<ClosedForm>{
      {"naive", BuildNaive, false, [](int p, int m, int) { return 3.0 * m * p; },
       [](int, int, int) { return 1.0; }},
      {"gpipe", BuildGpipe, false, [](int p, int m, int) { return 3.0 * (m + p - 1); },
       [](int, int m, int) { return 1.0 * m; }},
      {"1f1b", Build1F1B, false, [](int p, int m, int) { return 3.0 * (m + p - 1); },
       [](int p, int m, int) { return 1.0 * std::min(p, m); }},
      // m >= p: m(F + I + W) + (p - 1)(F + I - W). m < p: the last micro-batch's F and I
      // chains, (m + p - 1)(F + I), then rank 0's last W.
      {"zb-h1", BuildZbH1, false,
       [](int p, int m, int) { return m >= p ? 3.0 * m + p - 1 : 2.0 * (m + p - 1) + 1; },
       [](int p, int m, int) { return 1.0 * std::min(p, m); }},
      {"interleaved-1f1b", BuildInterleaved1F1B, true, LoopMakespan, nullptr},
      {"looped-bfs", BuildLoopedBfs, true, LoopMakespan,
       [](int, int m, int v) { return 1.0 * v * m; }},
  };
  return *table;
}

TEST(ClosedFormsClassicTest, MakespanAndRankZeroPeak) {
  CostModel costs;
  costs.uniform = StageCost{.f = 1, .i = 1, .w = 1};
  const SimOptions options{.steady_state_steps = 0};
  for (const ClosedForm& form : Table()) {
    const std::vector<int> chunk_choices =
        form.takes_chunks ? std::vector<int>{2, 3, 4} : std::vector<int>{1};
    for (int p = 1; p <= 8; ++p) {
      for (int v : chunk_choices) {
        for (int m = 1; m <= 3 * p + 1; ++m) {
          SCOPED_TRACE(form.name + " p=" + std::to_string(p) + " v=" + std::to_string(v) +
                       " m=" + std::to_string(m));
          const Program program =
              form.build({.pp = p, .microbatches = m, .chunks = form.takes_chunks ? v : 0});
          const SimResult result = Simulate(program, costs, options);
          EXPECT_DOUBLE_EQ(result.makespan, form.makespan(p, m, v));
          if (form.rank0_peak) {
            EXPECT_DOUBLE_EQ(result.peak_activations[0], form.rank0_peak(p, m, v));
          }
        }
      }
    }
  }
}

// The anchors' worked numbers (ANCHORS.md): 1F1B and ZB-H1 side by side.
TEST(ClosedFormsClassicTest, ZbH1CutsOneFOneBBubbleToAThird) {
  CostModel costs;
  costs.uniform = StageCost{.f = 1, .i = 1, .w = 1};
  const SimOptions options{.steady_state_steps = 0};
  const ScheduleOptions schedule{.pp = 4, .microbatches = 8};
  const SimResult one_f_one_b = Simulate(Build1F1B(schedule), costs, options);
  const SimResult zb_h1 = Simulate(BuildZbH1(schedule), costs, options);
  const double work = 3.0 * 8;
  EXPECT_DOUBLE_EQ(one_f_one_b.makespan - work, 9);  // (p - 1)(F + B)
  EXPECT_DOUBLE_EQ(zb_h1.makespan - work, 3);        // (p - 1)(F + I - W)
}

}  // namespace
}  // namespace conveyor
