// Ordering work between the CUDA streams of threads that share tensors, device-generic.
//
// A thread computes on its current stream (c10's per-thread current stream of a device).
// When a tensor produced on one thread's stream is handed to another thread, the consumer's
// stream must wait for the producer's work, and memory the caching allocator gave to one
// stream must not be reused while another stream still reads it. On CPU every function here
// does nothing: CPU work is done when the call that did it returns.
//
// Thread-safety: a StreamMark may be waited on by any thread, any number of times; the free
// functions act on the calling thread's current stream.
#ifndef CONVEYOR_DEVICE_STREAM_ORDER_H_
#define CONVEYOR_DEVICE_STREAM_ORDER_H_

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <memory>
#include <optional>

namespace c10 {
class Event;
}

namespace conveyor {

// The work enqueued so far on the calling thread's current stream of a device (an event
// recorded there); empty for CPU devices and when default-constructed.
class StreamMark {
 public:
  StreamMark() = default;
  static StreamMark Here(const c10::Device& device);

  // Makes the calling thread's current stream of the mark's device wait for the marked work
  // (the host does not wait). Does nothing for an empty mark.
  void MakeCurrentStreamWait() const;

 private:
  std::shared_ptr<c10::Event> event_;
};

// Tells `tensor`'s caching allocator that the calling thread's current stream uses its
// memory, so that the memory is not reused before that stream's work so far completes. For
// a tensor allocated on another thread's stream and released after this thread's last use.
void RecordCurrentStreamUse(const at::Tensor& tensor);

// Blocks the host until the calling thread's current stream of `device` has finished.
void SynchronizeCurrentStream(const c10::Device& device);

// A stream of `device` from the pool, for a thread that should compute apart from the
// others (ranks as threads sharing one GPU); nullopt for CPU devices.
std::optional<c10::Stream> StreamFromPool(const c10::Device& device);

// Makes `device` the calling thread's current device and a stream of its own from the pool
// its current stream (both stay after the call). Nothing on the CPU.
void ComputeOnOwnStream(const c10::Device& device);

}  // namespace conveyor

#endif  // CONVEYOR_DEVICE_STREAM_ORDER_H_
