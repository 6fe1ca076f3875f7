#include "conveyor/schedule/builders/zb_v.h"

#include <algorithm>

#include "conveyor/schedule/builders/builder_util.h"

namespace conveyor {
namespace {

// Appends passes of one stage with their own running micro-batch counters.
struct Chunk {
  int stage;
  int f = 0, i = 0, w = 0;
};

// Rank r's ZB-V order for n micro-batches (n >= 2p - 1). Chunk 0 is stage r (going down
// the V), chunk 1 is stage 2p-1-r (coming back up); rank 0 holds both ends.
std::vector<Action> RankOrder(int p, int r, int n) {
  std::vector<Action> out;
  Chunk c0{r}, c1{2 * p - 1 - r};
  auto f = [&](Chunk& c) { out.push_back(Action{Op::kForward, c.stage, c.f++}); };
  auto i = [&](Chunk& c) { out.push_back(Action{Op::kBackwardInput, c.stage, c.i++}); };
  auto w = [&](Chunk& c) { out.push_back(Action{Op::kBackwardWeight, c.stage, c.w++}); };
  // Warm-up: fill the way down, then interleave the way back up.
  for (int k = 0; k < 2 * (p - r) - 1; ++k) f(c0);
  for (int k = 0; k < r; ++k) {
    f(c1);
    f(c0);
  }
  for (int k = 0; k < p - r; ++k) {
    f(c1);
    i(c1);
    w(c1);
  }
  // Steady state: F I W on each chunk in turn.
  while (c1.f < c0.f || c0.f < n) {
    if (c0.f < n) f(c0);
    i(c0);
    w(c0);
    f(c1);
    i(c1);
    w(c1);
  }
  // Cool-down: input gradients first, weight passes fill the tail.
  for (int k = 0; k < r; ++k) {
    i(c0);
    i(c1);
  }
  for (int k = 0; k < p - r; ++k) {
    i(c0);
    w(c0);
  }
  while (c1.w < c1.i) w(c1);
  while (c0.w < c0.i) w(c0);
  return out;
}

}  // namespace

Program BuildZbV(const ScheduleOptions& options) {
  CheckPipelineOptions(options, "zb-v");
  CheckTwoChunks(options, "zb-v");
  const int p = options.pp, m = options.microbatches;
  Program program(Layout::V(p, m));
  // The order is built for at least 2p - 1 micro-batches, the fewest that fill the V; with
  // fewer, the passes of the missing micro-batches are dropped (what is left keeps a valid
  // order: every kept pass depends only on kept passes that came earlier).
  const int n = std::max(m, 2 * p - 1);
  for (int r = 0; r < p; ++r) {
    for (const Action& a : RankOrder(p, r, n)) {
      if (a.microbatch < m) program.ranks[r].push_back(a);
    }
  }
  return program;
}

}  // namespace conveyor
