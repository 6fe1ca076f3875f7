#include "conveyor/profile/timed_transport.h"

#include <utility>

#include "conveyor/runtime/executor.h"

namespace conveyor {

TimedTransport::TimedTransport(Transport* inner) : inner_(inner) {}

std::vector<CollectiveSpan> TimedTransport::TakeSpans() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(spans_, {});
}

void TimedTransport::Record(const char* name, double start, int64_t bytes) {
  const double end = Executor::Now();
  std::lock_guard<std::mutex> lock(mu_);
  spans_.push_back(CollectiveSpan{name, start, end, bytes});
}

std::shared_ptr<Work> TimedTransport::Send(at::Tensor tensor, int dst, std::uint32_t tag) {
  return inner_->Send(std::move(tensor), dst, tag);
}

std::shared_ptr<Work> TimedTransport::Recv(at::Tensor buffer, int src, std::uint32_t tag) {
  return inner_->Recv(std::move(buffer), src, tag);
}

void TimedTransport::AllReduceSum(std::vector<at::Tensor>& tensors) {
  const double start = Executor::Now();
  int64_t bytes = 0;
  for (const at::Tensor& t : tensors) bytes += static_cast<int64_t>(t.nbytes());
  inner_->AllReduceSum(tensors);
  Record("all-reduce", start, bytes);
}

at::Tensor TimedTransport::ReduceScatterSum(const at::Tensor& input,
                                            const std::vector<int64_t>& counts) {
  const double start = Executor::Now();
  at::Tensor part = inner_->ReduceScatterSum(input, counts);
  Record("reduce-scatter", start, static_cast<int64_t>(input.nbytes()));
  return part;
}

std::vector<at::Tensor> TimedTransport::AllGather(const at::Tensor& local) {
  const double start = Executor::Now();
  std::vector<at::Tensor> all = inner_->AllGather(local);
  Record("all-gather", start, static_cast<int64_t>(local.nbytes()));
  return all;
}

at::Tensor TimedTransport::AllToAll(const at::Tensor& input,
                                    const std::vector<int64_t>& send_counts,
                                    const std::vector<int64_t>& recv_counts) {
  const double start = Executor::Now();
  at::Tensor received = inner_->AllToAll(input, send_counts, recv_counts);
  Record("all-to-all", start, static_cast<int64_t>(input.nbytes()));
  return received;
}

void TimedTransport::Broadcast(at::Tensor& tensor, int root) {
  const double start = Executor::Now();
  inner_->Broadcast(tensor, root);
  Record("broadcast", start, static_cast<int64_t>(tensor.nbytes()));
}

void TimedTransport::Barrier() {
  const double start = Executor::Now();
  inner_->Barrier();
  Record("barrier", start, 0);
}

std::unique_ptr<Transport> TimedTransport::NewGroup(const std::vector<int>& ranks) {
  return inner_->NewGroup(ranks);
}

void TimedTransport::ReportFailure(const std::string& message) noexcept {
  inner_->ReportFailure(message);
}

double TotalSeconds(const std::vector<CollectiveSpan>& spans) {
  double total = 0;
  for (const CollectiveSpan& s : spans) total += s.end - s.start;
  return total;
}

}  // namespace conveyor
