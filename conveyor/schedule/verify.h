// Verification of a program: every problem at once, not just the first.
//
// Findings:
//   kBadAction        stage or micro-batch outside the layout
//   kWrongRank        an action on a rank that does not hold its stage
//   kStageOnTwoRanks  one stage's actions appear on two ranks
//   kMissing          a (stage, micro-batch) lacks its F, or its B (or I and W)
//   kDuplicate        an F, B, I or W that appears more than once
//   kMixedBackward    both B and I/W for the same (stage, micro-batch)
//   kWrongOrder       on its rank, I/B before its F, or W before its I
//   kBrokenDependency a compute action that can never run: a cycle across ranks
//   kUnmatchedComm    a SEND without its RECV or the reverse, a comm between stages of one
//                     rank, a missing comm for a transfer between ranks (lowered programs
//                     only), a SEND before its producer or a RECV after its consumer
//   kCommOrder        between two ranks, the receiver posts its RECVs in another order than
//                     the sender its SENDs (a backend that matches messages by order, not by
//                     tag, as NCCL does, would hand a message to the wrong buffer)
//   kMemoryBound      a rank holds more in-flight micro-batch activations than allowed
//
// Verify() never throws for a bad program; it throws only on an internal error.
#ifndef CONVEYOR_SCHEDULE_VERIFY_H_
#define CONVEYOR_SCHEDULE_VERIFY_H_

#include <string>
#include <string_view>
#include <vector>

#include "conveyor/schedule/program.h"

namespace conveyor {

enum class FindingKind {
  kBadAction,
  kWrongRank,
  kStageOnTwoRanks,
  kMissing,
  kDuplicate,
  kMixedBackward,
  kWrongOrder,
  kBrokenDependency,
  kUnmatchedComm,
  kCommOrder,
  kMemoryBound,
};

std::string_view FindingKindName(FindingKind kind);

struct Finding {
  FindingKind kind;
  int rank = -1;   // -1 when the finding is not about one rank
  int index = -1;  // position in the rank's list, -1 when not about one action
  std::string message;
};

struct VerifyOptions {
  // Most (stage, micro-batch) activations a rank may hold at once: counted from F until
  // its B or W. 0 = no bound.
  int max_in_flight = 0;
};

std::vector<Finding> Verify(const Program& program, const VerifyOptions& options = {});

// One finding per line: "[missing] rank 1: stage 2 micro-batch 3 has no forward".
std::string FormatFindings(const std::vector<Finding>& findings);

// Throws UserError with all findings when Verify() reports any.
void VerifyOrThrow(const Program& program, const VerifyOptions& options = {});

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_VERIFY_H_
