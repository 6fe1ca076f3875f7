#include "conveyor/device/device_timer.h"

#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include "conveyor/common/error.h"
#include "conveyor/device/torch_compat.h"

namespace conveyor {

DeviceTimer::DeviceTimer(c10::Device device)
    : device_(device), active_(kHasEventTiming && device.type() != c10::DeviceType::CPU) {}

DeviceTimer::~DeviceTimer() = default;

int DeviceTimer::Mark() {
  CONVEYOR_ASSERT(active_) << "DeviceTimer::Mark on " << device_ << ", which it does not time";
  // BACKEND_DEFAULT: the backend's own event flags, which keep timing (c10's default drops it).
  auto event = std::make_unique<c10::Event>(device_.type(), c10::EventFlag::BACKEND_DEFAULT);
  event->record(c10::impl::VirtualGuardImpl(device_.type()).getStream(device_));
  marks_.push_back(std::move(event));
  return static_cast<int>(marks_.size()) - 1;
}

std::vector<double> DeviceTimer::Resolve() {
  std::vector<double> seconds;
  if (marks_.empty()) return seconds;
  const c10::Event& last = *marks_.back();
  SynchronizeEvent(last);
  seconds.reserve(marks_.size());
  for (const auto& mark : marks_) seconds.push_back(EventMilliseconds(*mark, last) / 1e3);
  marks_.clear();
  return seconds;
}

void DeviceTimer::Clear() { marks_.clear(); }

}  // namespace conveyor
