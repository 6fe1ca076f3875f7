// Splits a rank's time blocked on messages into what the schedule makes it wait for and what
// the transfers themselves cost, from the step's measured spans and the times its peers
// posted their sends (Gloo cannot say when a message arrived, only when a wait ended).
//
// For a message this rank received, posted by its sender at P, waited for over [ws, we]:
//   dependency wait  the part before P: the sender had not produced it yet (pipeline bubble)
//   transfer wait    the part after P: the message was on its way (exposed communication)
//   in flight        we - P: from the send's posting until the data was usable here
//   overlapped       in flight minus the transfer wait: the message travelled (or waited in
//                    its buffer) while this rank did other work
// The end-of-step waits for this rank's own sends count as transfer wait.
//
// Times of both sides must come from one clock (SharedClockOrigin). Pure functions.
#ifndef CONVEYOR_PROFILE_COMM_BREAKDOWN_H_
#define CONVEYOR_PROFILE_COMM_BREAKDOWN_H_

#include <vector>

#include "conveyor/schedule/layout.h"
#include "conveyor/timeline/timeline.h"

namespace conveyor {

struct CommBreakdown {
  double dependency_wait_s = 0;
  double transfer_wait_s = 0;
  double in_flight_s = 0;
  double overlapped_s = 0;
  int messages = 0;  // received

  CommBreakdown& operator+=(const CommBreakdown& o);
  // overlapped / in flight: 1 when every transfer hid behind other work (1 with no messages).
  double overlap_fraction() const;
};

// One slot per message of a step: (sending stage, micro-batch, forward or gradient).
int MessageSlots(const Layout& layout);

// The posting time (end of its kPost span) of every send in `step` at its slot, 0 elsewhere:
// the ranks' tables summed give every message's posting time.
std::vector<double> SendPostTimes(const Layout& layout, const Timeline& step);

// The breakdown for `rank` from its spans in `step` and every message's posting time.
CommBreakdown BreakDownComm(const Layout& layout, const Timeline& step, int rank,
                            const std::vector<double>& posted);

}  // namespace conveyor

#endif  // CONVEYOR_PROFILE_COMM_BREAKDOWN_H_
