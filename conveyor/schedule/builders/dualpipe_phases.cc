#include "conveyor/schedule/builders/dualpipe_phases.h"

#include <deque>

#include "conveyor/common/error.h"

namespace conveyor {

std::vector<Action> DualPipePhases(const DualPipeRank& rank) {
  const int n = rank.n, k = rank.k;
  CONVEYOR_ASSERT(rank.per_chunk >= 2 * n - k) << "too few micro-batches for the phases";
  std::vector<Action> out;
  int next_f[2] = {rank.first_microbatch[0], rank.first_microbatch[1]};
  int next_b[2] = {rank.first_microbatch[0], rank.first_microbatch[1]};
  std::deque<Action> weights;
  auto forward = [&](int c) { return Action{Op::kForward, rank.stage[c], next_f[c]++}; };
  // A backward of chunk c: full, or I with its W queued.
  auto backward = [&](int c, bool split) {
    const Action b{split ? Op::kBackwardInput : Op::kBackward, rank.stage[c], next_b[c]++};
    if (split) weights.push_back(Action{Op::kBackwardWeight, b.stage, b.microbatch});
    return b;
  };
  auto weight = [&] {
    CONVEYOR_ASSERT(!weights.empty()) << "no queued W";
    out.push_back(weights.front());
    weights.pop_front();
  };
  auto overlap = [&](int f, int b) {
    const Action fa = forward(f), ba = backward(b, false);
    out.push_back(Action::Overlap(fa.stage, fa.microbatch, ba.op, ba.stage, ba.microbatch));
  };

  for (int i = 0; i < 2 * (n - k - 1); ++i) out.push_back(forward(0));
  for (int i = 0; i < k + 1; ++i) {
    out.push_back(forward(0));
    out.push_back(forward(1));
  }
  for (int i = 0; i < n - k - 1; ++i) {
    out.push_back(backward(1, true));
    weight();
    out.push_back(forward(1));
  }
  for (int i = 0; i < rank.per_chunk - 2 * n + k + 1; ++i) {
    if (i == 0 && rank.split_first_pair) {
      out.push_back(forward(0));
      out.push_back(backward(1, false));
    } else {
      overlap(0, 1);
    }
    overlap(1, 0);
  }
  for (int i = 0; i < n - k - 1; ++i) {
    out.push_back(backward(1, false));
    overlap(1, 0);
  }
  bool split = false;
  for (int i = 0; i < k + 1; ++i) {
    if (i == (k + 1) / 2 && k % 2 == 1) split = true;
    out.push_back(backward(1, split));
    if (i == (k + 1) / 2 && k % 2 == 0) split = true;
    out.push_back(backward(0, split));
  }
  for (int i = 0; i < n - k - 1; ++i) {
    weight();
    out.push_back(backward(0, true));
  }
  while (!weights.empty()) weight();
  return out;
}

}  // namespace conveyor
