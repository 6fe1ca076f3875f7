#include "conveyor/train/data_parallel_reducer.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

double DataParallelStats::hidden_fraction() const {
  if (comm_s <= 0) return 1;
  return std::clamp(1 - exposed_s / comm_s, 0.0, 1.0);
}

DataParallelReducer::DataParallelReducer(Transport* group, int64_t bucket_bytes)
    : group_(group), bucket_bytes_(bucket_bytes) {
  CONVEYOR_ASSERT(group != nullptr && group->world_size() >= 2)
      << "a data-parallel reducer needs a group of two ranks or more";
  CONVEYOR_ASSERT(bucket_bytes >= 1) << "bucket of " << bucket_bytes << " bytes";
  thread_ = std::thread([this] { Loop(); });
}

DataParallelReducer::~DataParallelReducer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void DataParallelReducer::Start(const NamedTensors& params) {
  std::vector<Bucket> buckets(1);
  for (const auto& [name, p] : params) {
    if (!p.grad().defined()) p.mutable_grad() = at::zeros_like(p);
    if (buckets.back().bytes >= bucket_bytes_) buckets.emplace_back();
    buckets.back().grads.push_back(p.grad());
    buckets.back().bytes += static_cast<int64_t>(p.grad().nbytes());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Bucket& b : buckets) {
      if (b.grads.empty()) continue;
      queue_.push_back(std::move(b));
      ++in_flight_;
    }
  }
  cv_.notify_all();
}

void DataParallelReducer::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_, nothing left
    Bucket bucket = std::move(queue_.front());
    queue_.pop_front();
    const bool failed = error_ != nullptr;
    lock.unlock();
    const double start = Now();
    std::exception_ptr error;
    if (!failed) {  // after a failure the group is unusable: later buckets are dropped
      try {
        at::NoGradGuard no_grad;
        std::vector<at::Tensor> flat;
        for (const at::Tensor& g : bucket.grads) flat.push_back(g.reshape({-1}));
        std::vector<at::Tensor> sum = {at::cat(flat)};  // (total elements,)
        group_->AllReduceSum(sum);
        int64_t offset = 0;
        for (at::Tensor& g : bucket.grads) {
          g.copy_(sum[0].narrow(0, offset, g.numel()).view(g.sizes()));
          offset += g.numel();
        }
      } catch (...) {
        error = std::current_exception();
      }
    }
    const double seconds = Now() - start;
    lock.lock();
    if (error != nullptr && error_ == nullptr) error_ = error;
    stats_.comm_s += seconds;
    stats_.bytes += bucket.bytes;
    ++stats_.buckets;
    --in_flight_;
    cv_.notify_all();
  }
}

DataParallelStats DataParallelReducer::Finish() {
  const double start = Now();
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return in_flight_ == 0; });
  DataParallelStats stats = std::exchange(stats_, DataParallelStats{});
  stats.exposed_s = Now() - start;
  if (error_ != nullptr) std::rethrow_exception(error_);
  return stats;
}

}  // namespace conveyor
