// A Transport that times the collectives passing through it, so the communication of a
// parallel axis outside the pipeline (the data-parallel gradient reduction, the
// tensor-parallel all-reduces inside the layers) can be measured per rank and drawn on its
// own track of a trace.
//
// Every collective (AllReduceSum, ReduceScatterSum, AllGather, Broadcast, Barrier) is
// forwarded to `inner` and recorded as a CollectiveSpan: what it was, when it started and
// ended (Executor::Now() seconds) and the bytes this rank passed in. Point-to-point
// operations, group creation and failure reports are forwarded untimed (the executor times
// the pipeline's messages itself); groups made by NewGroup are plain groups of `inner`.
//
// Cost per collective: two clock readings and a vector append under a mutex.
//
// Thread-safety: as Transport (one thread at a time posts operations, possibly not always
// the same thread: the data-parallel reducer's thread and the rank's own thread take turns);
// TakeSpans may be called from any thread. REQUIRES: `inner` outlives this transport.
#ifndef CONVEYOR_PROFILE_TIMED_TRANSPORT_H_
#define CONVEYOR_PROFILE_TIMED_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "conveyor/comm/transport.h"

namespace conveyor {

struct CollectiveSpan {
  std::string name;  // "all-reduce", "reduce-scatter", "all-gather", "broadcast", "barrier"
  double start = 0;  // Executor::Now() seconds
  double end = 0;
  int64_t bytes = 0;  // of this rank's input tensors
};

class TimedTransport : public Transport {
 public:
  explicit TimedTransport(Transport* inner);

  // The collectives recorded since the last call, in the order they started; clears them.
  std::vector<CollectiveSpan> TakeSpans();

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  std::shared_ptr<Work> Send(at::Tensor tensor, int dst, std::uint32_t tag) override;
  std::shared_ptr<Work> Recv(at::Tensor buffer, int src, std::uint32_t tag) override;
  void AllReduceSum(std::vector<at::Tensor>& tensors) override;
  at::Tensor ReduceScatterSum(const at::Tensor& input, const std::vector<int64_t>& counts) override;
  std::vector<at::Tensor> AllGather(const at::Tensor& local) override;
  at::Tensor AllToAll(const at::Tensor& input, const std::vector<int64_t>& send_counts,
                      const std::vector<int64_t>& recv_counts) override;
  void Broadcast(at::Tensor& tensor, int root) override;
  void Barrier() override;
  std::unique_ptr<Transport> NewGroup(const std::vector<int>& ranks) override;
  void ReportFailure(const std::string& message) noexcept override;

 private:
  void Record(const char* name, double start, int64_t bytes);

  Transport* inner_;
  std::mutex mu_;
  std::vector<CollectiveSpan> spans_;  // guarded by mu_
};

// Seconds the spans took in all.
double TotalSeconds(const std::vector<CollectiveSpan>& spans);

}  // namespace conveyor

#endif  // CONVEYOR_PROFILE_TIMED_TRANSPORT_H_
