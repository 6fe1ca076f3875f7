#include "conveyor/device/stream_order.h"

#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>

namespace conveyor {
namespace {

bool HasStreams(const c10::Device& device) { return device.type() != c10::DeviceType::CPU; }

c10::Stream CurrentStream(const c10::Device& device) {
  return c10::impl::VirtualGuardImpl(device.type()).getStream(device);
}

}  // namespace

StreamMark StreamMark::Here(const c10::Device& device) {
  StreamMark mark;
  if (!HasStreams(device)) return mark;
  mark.event_ = std::make_shared<c10::Event>(device.type());
  mark.event_->record(CurrentStream(device));
  return mark;
}

void StreamMark::MakeCurrentStreamWait() const {
  if (event_ == nullptr) return;
  event_->block(CurrentStream(event_->device()));
}

void RecordCurrentStreamUse(const at::Tensor& tensor) {
  if (!tensor.defined() || !HasStreams(tensor.device())) return;
  c10::impl::VirtualGuardImpl(tensor.device().type())
      .recordDataPtrOnStream(tensor.storage().data_ptr(), CurrentStream(tensor.device()));
}

void SynchronizeCurrentStream(const c10::Device& device) {
  if (!HasStreams(device)) return;
  c10::impl::VirtualGuardImpl(device.type()).synchronizeStream(CurrentStream(device));
}

std::optional<c10::Stream> StreamFromPool(const c10::Device& device) {
  if (!HasStreams(device)) return std::nullopt;
  return c10::impl::VirtualGuardImpl(device.type()).getStreamFromGlobalPool(device);
}

void ComputeOnOwnStream(const c10::Device& device) {
  const std::optional<c10::Stream> stream = StreamFromPool(device);
  if (!stream) return;
  c10::impl::VirtualGuardImpl guard(device.type());
  guard.setDevice(device);
  guard.exchangeStream(*stream);
}

}  // namespace conveyor
