// Test helpers shared by the builder tests (header-only; included by *_test.cc only).
#ifndef CONVEYOR_SCHEDULE_BUILDERS_BUILDER_TESTING_H_
#define CONVEYOR_SCHEDULE_BUILDERS_BUILDER_TESTING_H_

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/schedule/lower.h"
#include "conveyor/schedule/program.h"
#include "conveyor/schedule/schedule_options.h"
#include "conveyor/schedule/verify.h"

namespace conveyor {

// Checks what every builder promises: a compute-only program on a loop layout of p ranks,
// v stages each and m micro-batches; every action on its stage's rank; each (stage,
// micro-batch) with exactly one F and one B, or (split_backward) one I and one W; Lower()
// succeeds; Verify() finds nothing, before and after lowering.
inline void ExpectSoundProgram(const Program& program, int p, int v, int m, bool split_backward) {
  const Layout& layout = program.layout;
  ASSERT_EQ(layout.num_ranks(), p);
  ASSERT_EQ(layout.num_stages(), p * v);
  ASSERT_EQ(layout.num_microbatches(), m);
  ASSERT_EQ(program.ranks.size(), static_cast<size_t>(p));
  const Op backward_ops[] = {Op::kBackward, Op::kBackwardInput, Op::kBackwardWeight};
  // counts[op][stage * m + mb]
  std::vector<std::vector<int>> counts(4, std::vector<int>(p * v * m, 0));
  for (int r = 0; r < p; ++r) {
    for (const Action& a : program.ranks[r]) {
      ASSERT_TRUE(a.op == Op::kForward || a.op == backward_ops[0] || a.op == backward_ops[1] ||
                  a.op == backward_ops[2])
          << "not a plain compute action: " << a;
      ASSERT_TRUE(layout.valid_stage(a.stage) && a.microbatch >= 0 && a.microbatch < m) << a;
      EXPECT_EQ(layout.rank_of(a.stage), r) << a << " on rank " << r;
      ++counts[static_cast<int>(a.op)][a.stage * m + a.microbatch];
    }
  }
  for (int cell = 0; cell < p * v * m; ++cell) {
    EXPECT_EQ(counts[static_cast<int>(Op::kForward)][cell], 1)
        << "stage " << cell / m << " mb " << cell % m;
    for (Op op : backward_ops) {
      const bool wanted = split_backward ? op != Op::kBackward : op == Op::kBackward;
      EXPECT_EQ(counts[static_cast<int>(op)][cell], wanted ? 1 : 0)
          << OpName(op) << " of stage " << cell / m << " mb " << cell % m;
    }
  }
  EXPECT_TRUE(Verify(program).empty()) << FormatFindings(Verify(program));
  try {
    const Program lowered = Lower(program);
    EXPECT_TRUE(Verify(lowered).empty()) << FormatFindings(Verify(lowered));
  } catch (const Error& e) {
    ADD_FAILURE() << "Lower() threw: " << e.what() << "\n" << program.ToText();
  }
}

// The actions of `actions` whose op is `op`, in order.
inline std::vector<Action> OnlyOp(const std::vector<Action>& actions, Op op) {
  std::vector<Action> out;
  for (const Action& a : actions) {
    if (a.op == op) out.push_back(a);
  }
  return out;
}

// How many actions open the list before its first backward-like (B or I) action.
inline int LeadingForwards(const std::vector<Action>& actions) {
  int n = 0;
  while (n < static_cast<int>(actions.size()) && actions[n].op == Op::kForward) ++n;
  return n;
}

// Expects `build(options)` to throw UserError whose message contains `needle`.
inline void ExpectRejected(const std::function<Program(const ScheduleOptions&)>& build,
                           const ScheduleOptions& options, const std::string& needle) {
  try {
    build(options);
    ADD_FAILURE() << "accepted pp=" << options.pp << " microbatches=" << options.microbatches
                  << " chunks=" << options.chunks;
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message '" << e.what() << "' does not name '" << needle << "'";
  }
}

// The bad inputs every single-chunk builder refuses, each with the value it must name.
inline void ExpectSingleChunkPreconditions(
    const std::function<Program(const ScheduleOptions&)>& build, const std::string& name) {
  ExpectRejected(build, {.pp = 0, .microbatches = 4}, "pp = 0");
  ExpectRejected(build, {.pp = -2, .microbatches = 4}, "pp = -2");
  ExpectRejected(build, {.pp = 4, .microbatches = 0}, "microbatches = 0");
  ExpectRejected(build, {.pp = 4, .microbatches = 4, .chunks = 2}, "chunks = 2");
  ExpectRejected(build, {.pp = 4, .microbatches = 4, .chunks = -1}, "chunks = -1");
  ExpectRejected(build, {.pp = 0, .microbatches = 4}, name);
  EXPECT_NO_THROW(build({.pp = 4, .microbatches = 4, .chunks = 1}));
}

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_BUILDERS_BUILDER_TESTING_H_
