// The two lanes of work a rank may run at once: lane 0, the executor's own thread (every
// action of the program, every backward); lane 1, the forward half of an overlapped pair
// (DualPipe's OVERLAP_F_B, runtime/executor.h), computing while lane 0 runs the backward half.
//
// A collective a model makes inside its forward or backward (the experts' all-to-all) runs
// on the group of the lane it runs in (LaneGroups), so that the two lanes' collectives never
// interleave on one group: within a lane they come in program order on every rank, whatever
// the timing between the lanes.
//
// Thread-safety: the lane is per thread.
#ifndef CONVEYOR_COMM_OVERLAP_LANE_H_
#define CONVEYOR_COMM_OVERLAP_LANE_H_

namespace conveyor {

class Transport;

// This thread's lane: 0 unless an OverlapLaneScope says otherwise.
int OverlapLane();

// Sets this thread's lane (0 or 1) while alive. Scopes nest (LIFO) on one thread.
class OverlapLaneScope {
 public:
  explicit OverlapLaneScope(int lane);
  ~OverlapLaneScope();
  OverlapLaneScope(const OverlapLaneScope&) = delete;
  OverlapLaneScope& operator=(const OverlapLaneScope&) = delete;

 private:
  int previous_;
};

// One group of ranks as a transport per lane (not owned). The same transport for both when
// the lanes never overlap (lane 1 null: lane 0's).
struct LaneGroups {
  Transport* lane0 = nullptr;
  Transport* lane1 = nullptr;
  // The calling thread's lane's group.
  Transport* Current() const;
};

}  // namespace conveyor

#endif  // CONVEYOR_COMM_OVERLAP_LANE_H_
