// A pipeline program: a layout plus one ordered action list per rank.
//
// Builders emit compute-only programs (F, B, I, W, OVERLAP_F_B); Lower() adds SEND/RECV.
// A program is plain data: copy it, edit it, hand it to Verify(), Simulate() or an executor.
#ifndef CONVEYOR_SCHEDULE_PROGRAM_H_
#define CONVEYOR_SCHEDULE_PROGRAM_H_

#include <string>
#include <vector>

#include "conveyor/schedule/action.h"
#include "conveyor/schedule/layout.h"

namespace conveyor {

struct Program {
  explicit Program(Layout layout_in) : layout(std::move(layout_in)), ranks(layout.num_ranks()) {}

  Layout layout;
  std::vector<std::vector<Action>> ranks;  // ranks[r]: rank r's actions, in order

  // True when any rank holds a SEND or RECV.
  bool has_comms() const;
  // The same program without SEND/RECV actions.
  Program ComputeOnly() const;
  // Total number of actions over all ranks.
  size_t size() const;
  // One line per rank: "rank 0: 0F0 0F1 ...".
  std::string ToText() const;
};

// Data dependencies of compute actions, shared by Lower(), Verify() and the simulator.
//
// F(s, i)    after F(prev(s), i)
// B/I(s, i)  after F(s, i) and B/I(next(s), i) (a last stage: after its own F)
// W(s, i)    after I(s, i)
// OVERLAP_F_B: both halves' dependencies.
//
// Tracks which compute has completed. Not thread-safe.
class Progress {
 public:
  explicit Progress(const Layout& layout);

  // Whether `action` may run now. When it may not and `missing` is given, *missing is the
  // producer it waits for ("1F3"). Precondition: a compute action whose stage and
  // micro-batch are valid for the layout.
  bool Ready(const Action& action, Action* missing = nullptr) const;
  void MarkDone(const Action& action);

  bool forward_done(int stage, int mb) const { return flags(stage, mb) & kF; }
  bool input_grad_done(int stage, int mb) const { return flags(stage, mb) & kI; }
  bool weight_grad_done(int stage, int mb) const { return flags(stage, mb) & kW; }

 private:
  static constexpr unsigned char kF = 1, kI = 2, kW = 4;
  unsigned char flags(int stage, int mb) const { return flags_[stage * m_ + mb]; }
  bool ReadySimple(const Action& action, Action* missing) const;
  void MarkSimple(const Action& action);

  const Layout* layout_;
  int m_;
  std::vector<unsigned char> flags_;
};

// Where a compute action's results go, when they cross to another rank.
struct Transfer {
  Op send_op;  // SEND_F or SEND_B, on the producing stage
  int from_stage;
  Op recv_op;  // RECV_F or RECV_B, on the consuming stage
  int to_stage;
  int microbatch;
};

// The cross-rank transfers `action` produces (0, 1 or 2 for OVERLAP_F_B), in the order the
// halves complete. Same-rank hand-offs are not transfers.
std::vector<Transfer> TransfersOf(const Layout& layout, const Action& action);

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_PROGRAM_H_
