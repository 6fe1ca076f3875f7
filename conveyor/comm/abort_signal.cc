#include "conveyor/comm/abort_signal.h"

#include <utility>

namespace conveyor {

AbortSignal::Subscription::Subscription(std::shared_ptr<AbortSignal> signal, std::uint64_t id)
    : signal_(std::move(signal)), id_(id) {}

AbortSignal::Subscription::Subscription(Subscription&& other) noexcept
    : signal_(std::move(other.signal_)), id_(std::exchange(other.id_, 0)) {}

AbortSignal::Subscription& AbortSignal::Subscription::operator=(Subscription&& other) noexcept {
  if (this != &other) {
    Reset();
    signal_ = std::move(other.signal_);
    id_ = std::exchange(other.id_, 0);
  }
  return *this;
}

AbortSignal::Subscription::~Subscription() { Reset(); }

void AbortSignal::Subscription::Reset() {
  if (signal_ != nullptr) signal_->Unsubscribe(id_);
  signal_.reset();
  id_ = 0;
}

std::shared_ptr<AbortSignal> AbortSignal::Create() {
  return std::shared_ptr<AbortSignal>(new AbortSignal());
}

bool AbortSignal::Trigger(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (triggered_.load(std::memory_order_relaxed)) return false;
  reason_ = reason;
  triggered_.store(true, std::memory_order_release);
  for (auto& [id, callback] : subscribers_) callback();
  return true;
}

AbortSignal::Subscription AbortSignal::Subscribe(std::function<void()> on_trigger) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (triggered_.load(std::memory_order_relaxed)) {
    on_trigger();
    return Subscription();
  }
  std::uint64_t id = next_id_++;
  subscribers_.emplace(id, std::move(on_trigger));
  return Subscription(shared_from_this(), id);
}

void AbortSignal::Unsubscribe(std::uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  subscribers_.erase(id);
}

}  // namespace conveyor
