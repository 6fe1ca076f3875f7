// One step of a pipeline program: compute, communication or a marker, on one stage and one
// micro-batch. Value type; cheap to copy.
//
// Text form (the one torch.distributed.pipelining prints, so programs interoperate):
//   "0F1"      stage 0, forward of micro-batch 1
//   "2I3"      stage 2, backward for inputs only, micro-batch 3
//   "0W1"      stage 0, backward for weights, micro-batch 1
//   "3B0"      stage 3, full backward (I then W), micro-batch 0
//   "1SEND_F0" stage 1 sends its forward output of micro-batch 0 to the next stage
//   "1RECV_B4" stage 1 receives the input gradient of micro-batch 4 from the next stage
//   "0REDUCE_GRAD"  stage 0's gradients are final (no micro-batch)
//   "(0F7;7B3)OVERLAP_F_B"  forward 0F7 and backward 7B3 run as one overlapped unit
//
// SEND/RECV name the stage that owns the action: SEND_F on the producer, RECV_F on the
// consumer, SEND_B on the stage whose input gradient is sent, RECV_B on the stage receiving
// the gradient of its output.
#ifndef CONVEYOR_SCHEDULE_ACTION_H_
#define CONVEYOR_SCHEDULE_ACTION_H_

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>

namespace conveyor {

enum class Op : std::uint8_t {
  kForward,         // F
  kBackward,        // B: full backward, I then W at once
  kBackwardInput,   // I: gradient of the stage input only
  kBackwardWeight,  // W: gradient of the stage weights (after I)
  kSendF,
  kRecvF,
  kSendB,
  kRecvB,
  kOverlapFB,   // a forward and a backward (B or I) overlapped as one unit
  kReduceGrad,  // marker: the stage's gradients are final
};

// The text of an op as it appears in an action: "F", "SEND_F", "OVERLAP_F_B", ...
std::string_view OpName(Op op);

bool IsCompute(Op op);      // F, B, I, W, OVERLAP_F_B
bool IsComm(Op op);         // SEND_*, RECV_*
bool IsBackwardish(Op op);  // B or I: the action that consumes the output gradient

struct Action {
  Op op = Op::kForward;
  int stage = -1;
  int microbatch = -1;  // -1 for REDUCE_GRAD
  // OVERLAP_F_B only: (stage, microbatch) above is the forward half; this is the backward
  // half, whose op is kBackward or kBackwardInput.
  Op overlap_op = Op::kBackward;
  int overlap_stage = -1;
  int overlap_microbatch = -1;

  static Action Overlap(int f_stage, int f_microbatch, Op b_op, int b_stage, int b_microbatch);

  // The halves of an OVERLAP_F_B action. Precondition: op == kOverlapFB.
  Action ForwardHalf() const { return Action{Op::kForward, stage, microbatch}; }
  Action BackwardHalf() const { return Action{overlap_op, overlap_stage, overlap_microbatch}; }

  std::string ToString() const;

  friend bool operator==(const Action& a, const Action& b);
};

std::ostream& operator<<(std::ostream& out, const Action& action);

// How "B" and "BW" are read. PyTorch once wrote "B" for backward-for-inputs and "BW" for a
// full backward; today it writes "I" and "B".
enum class Naming {
  kCurrent,  // I = inputs, W = weights, B = full backward; "BW" is an error
  kLegacy,   // B = inputs (today's I), BW = full backward (today's B), W = weights
};

// Parses one action. Throws UserError naming the text when it is not an action.
Action ParseAction(std::string_view text, Naming naming = Naming::kCurrent);

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_ACTION_H_
