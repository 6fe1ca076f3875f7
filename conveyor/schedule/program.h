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

// Data dependencies of compute actions: the one rule, used by Lower(), Verify(), the
// simulator and the greedy zero-bubble builder.
//
// F(s, i)    after F(prev(s), i)
// B/I(s, i)  after F(s, i) and B/I(next(s), i) (a last stage: after its own F)
// W(s, i)    after I(s, i)
// OVERLAP_F_B: both halves' dependencies.
//
// Progress records when each consumed result (the F and the I of one stage and
// micro-batch) finished: B finishes I too, OVERLAP_F_B both of its halves, W nothing that
// is consumed. Times are on the caller's clock (the simulator's seconds, the builder's time
// slots, or 0 where only the order matters); Progress only combines them in ReadyAt().
//
// Lifetimes: Progress holds a pointer to the layout it was made for.
// REQUIRES: that layout outlives this Progress and every copy of it.
// Copyable. Not thread-safe.
class Progress {
 public:
  explicit Progress(const Layout& layout);

  // Whether every result `action` consumes has finished. When not and `missing` is given,
  // *missing is the first producer it waits for ("1F3").
  // REQUIRES: `action` is a compute action whose stages and micro-batches are valid for the
  // layout.
  bool Ready(const Action& action, Action* missing = nullptr) const;
  // Ready() that also says when: where it returns true, *ready_at is when the last input
  // reaches `action`'s rank, the latest finish time over the results it consumes, plus
  // `transfer_time` for one produced on another rank (0 when it consumes none).
  // REQUIRES: as for Ready(); ready_at != nullptr.
  bool ReadyAt(const Action& action, double transfer_time, double* ready_at) const;

  // Records that `action` finished at time `at`.
  // REQUIRES: as for Ready(); at >= 0.
  void MarkDone(const Action& action, double at = 0);

 private:
  enum Result { kF = 0, kI = 1 };
  static constexpr double kNotDone = -1;
  size_t index(int stage, int mb, Result result) const {
    return (static_cast<size_t>(stage) * m_ + mb) * 2 + result;
  }
  // Ready() with the arrival time folded into *ready_at; ReadyAll splits OVERLAP_F_B.
  bool ReadyAll(const Action& action, double transfer_time, double* ready_at,
                Action* missing) const;
  bool ReadySimple(const Action& action, double transfer_time, double* ready_at,
                   Action* missing) const;
  void MarkSimple(const Action& action, double at);

  const Layout* layout_;
  int m_;
  std::vector<double> finish_;  // per (stage, micro-batch, result); kNotDone before
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
