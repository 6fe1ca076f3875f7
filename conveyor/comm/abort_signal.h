// AbortSignal: a one-shot "stop communicating" flag shared by every transport of one world
// inside a process.
//
// Some rank failing (reported by the runtime, or seen by a transport: a timeout, a lost
// connection) triggers the signal once with a reason such as "rank 3 failed: loss is NaN".
// Waits on pending operations subscribe to it and give up with a CommError carrying the
// reason, so no rank blocks forever on a peer that will never answer.
//
// Ownership: always held by std::shared_ptr (Subscribe needs it). Thread-safety: every member
// may be called from any thread. Subscriber callbacks run under the signal's lock, on the
// thread that triggers (or subscribes, when already triggered): they must be short, must not
// block, and must not call back into the signal. triggered() and reason() take no lock, so
// they may be called while holding locks that a subscriber takes.
#ifndef CONVEYOR_COMM_ABORT_SIGNAL_H_
#define CONVEYOR_COMM_ABORT_SIGNAL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace conveyor {

class AbortSignal : public std::enable_shared_from_this<AbortSignal> {
 public:
  // Unsubscribes on destruction; after the destructor returns the callback is not running
  // and never runs again. Move-only.
  class Subscription {
   public:
    Subscription() = default;
    Subscription(Subscription&& other) noexcept;
    Subscription& operator=(Subscription&& other) noexcept;
    ~Subscription();

   private:
    friend class AbortSignal;
    Subscription(std::shared_ptr<AbortSignal> signal, std::uint64_t id);
    void Reset();

    std::shared_ptr<AbortSignal> signal_;
    std::uint64_t id_ = 0;
  };

  static std::shared_ptr<AbortSignal> Create();

  // Triggers the signal with `reason` and runs every subscriber, unless it was triggered
  // before (then does nothing). Returns whether this call triggered it.
  bool Trigger(const std::string& reason);

  bool triggered() const { return triggered_.load(std::memory_order_acquire); }

  // The reason of the first Trigger. Precondition: triggered() returned true.
  const std::string& reason() const { return reason_; }

  // Runs `on_trigger` once when the signal triggers; at once if it already has.
  [[nodiscard]] Subscription Subscribe(std::function<void()> on_trigger);

 private:
  AbortSignal() = default;
  void Unsubscribe(std::uint64_t id);

  std::mutex mutex_;
  std::atomic<bool> triggered_{false};
  std::string reason_;  // written once, before triggered_ becomes true
  std::map<std::uint64_t, std::function<void()>> subscribers_;
  std::uint64_t next_id_ = 1;
};

}  // namespace conveyor

#endif  // CONVEYOR_COMM_ABORT_SIGNAL_H_
