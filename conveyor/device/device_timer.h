// Times intervals of work on the calling thread's current stream of a device with timing
// events, device-generic (CUDA's events on a GPU), without a host wait per interval: Mark()
// only records an event; Resolve() waits once, for the last mark, and gives every mark's
// time relative to it. On a CPU device, or with a libtorch whose events cannot measure time
// (before 2.6: torch_compat.h), the timer is inactive and callers time with the host clock.
//
// Thread-safety: one timer per thread; marks go on that thread's current stream.
#ifndef CONVEYOR_DEVICE_DEVICE_TIMER_H_
#define CONVEYOR_DEVICE_DEVICE_TIMER_H_

#include <c10/core/Device.h>

#include <memory>
#include <vector>

namespace c10 {
struct Event;
}

namespace conveyor {

class DeviceTimer {
 public:
  explicit DeviceTimer(c10::Device device);
  ~DeviceTimer();
  DeviceTimer(const DeviceTimer&) = delete;
  DeviceTimer& operator=(const DeviceTimer&) = delete;

  // True when Mark() records events (a device with streams and a libtorch that times them).
  bool active() const { return active_; }

  // REQUIRES: active(). Records an event after the work enqueued so far on the current
  // stream; returns its index (0, 1, ... since the last Resolve or Clear).
  int Mark();

  // Blocks until the last mark's work completed; returns, per mark in index order, the
  // seconds from that mark to the last one (>= 0; the last is 0), then forgets the marks.
  // Empty when there are none.
  std::vector<double> Resolve();

  // Forgets the marks without waiting (after an error).
  void Clear();

 private:
  const c10::Device device_;
  const bool active_;
  std::vector<std::unique_ptr<c10::Event>> marks_;
};

}  // namespace conveyor

#endif  // CONVEYOR_DEVICE_DEVICE_TIMER_H_
