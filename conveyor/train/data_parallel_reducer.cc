#include "conveyor/train/data_parallel_reducer.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/DeviceGuard.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "conveyor/common/error.h"
#include "conveyor/device/torch_compat.h"

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

DataParallelStats& DataParallelStats::operator+=(const DataParallelStats& other) {
  comm_s += other.comm_s;
  exposed_s += other.exposed_s;
  bytes += other.bytes;
  scattered_bytes += other.scattered_bytes;
  scattered_kept_bytes += other.scattered_kept_bytes;
  buckets += other.buckets;
  return *this;
}

DataParallelReducer::DataParallelReducer(Transport* group, int64_t bucket_bytes,
                                         std::shared_ptr<const ShardLayout> zero)
    : group_(group), bucket_bytes_(bucket_bytes), zero_(std::move(zero)) {
  CONVEYOR_ASSERT(group != nullptr && group->world_size() >= 2)
      << "a data-parallel reducer needs a group of two ranks or more";
  CONVEYOR_ASSERT(bucket_bytes >= 1) << "bucket of " << bucket_bytes << " bytes";
  CONVEYOR_ASSERT(zero_ == nullptr ||
                  (zero_->shards() == group->world_size() && zero_->index() == group->rank()))
      << "shard layout " << zero_->index() << " of " << zero_->shards() << " for rank "
      << group->rank() << " of a group of " << group->world_size();
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
    const int64_t flat = zero_ != nullptr && zero_->scattered(name) ? zero_->OffsetOf(p) : -1;
    // A new bucket when the last is full or of the other kind (a reduce-scattered bucket is
    // one run of the flat vector).
    const Bucket& last = buckets.back();
    const bool follows = flat < 0 ? last.flat_begin < 0
                                  : last.flat_begin >= 0 && last.flat_begin + last.numel == flat;
    if (!last.grads.empty() && (last.bytes >= bucket_bytes_ || !follows)) buckets.emplace_back();
    Bucket& bucket = buckets.back();
    if (bucket.grads.empty()) bucket.flat_begin = flat;
    CONVEYOR_ASSERT(flat < 0 || p.grad().is_contiguous())
        << name << ": a reduce-scattered gradient must be contiguous";
    bucket.grads.push_back(p.grad());
    bucket.bytes += static_cast<int64_t>(p.grad().nbytes());
    bucket.numel += p.numel();
  }
  const StreamMark ready =
      params.empty() ? StreamMark() : StreamMark::Here(params.front().second.device());
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Bucket& b : buckets) {
      if (b.grads.empty()) continue;
      b.ready = ready;
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
    int64_t kept = 0;
    if (!failed) {  // after a failure the group is unusable: later buckets are dropped
      try {
        kept = Reduce(bucket);
      } catch (...) {
        error = std::current_exception();
      }
    }
    const double seconds = Now() - start;
    lock.lock();
    if (error != nullptr && error_ == nullptr) error_ = error;
    stats_.comm_s += seconds;
    stats_.bytes += bucket.bytes;
    if (bucket.flat_begin >= 0) {
      stats_.scattered_bytes += bucket.bytes;
      stats_.scattered_kept_bytes += kept;
    }
    ++stats_.buckets;
    --in_flight_;
    cv_.notify_all();
  }
}

int64_t DataParallelReducer::Reduce(const Bucket& bucket) {
  const c10::Device device = bucket.grads.front().device();
  c10::OptionalDeviceGuard on_device;
  if (!device.is_cpu()) on_device.reset_device(device);
  bucket.ready.MakeCurrentStreamWait();
  const int64_t received = ReduceOnCurrentStream(bucket);
  SynchronizeCurrentStream(device);
  return received;
}

int64_t DataParallelReducer::ReduceOnCurrentStream(const Bucket& bucket) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> flat;
  for (const at::Tensor& g : bucket.grads) flat.push_back(g.reshape({-1}));
  std::vector<at::Tensor> sum = {at::cat(flat)};  // (total elements,)
  if (bucket.flat_begin < 0) {
    group_->AllReduceSum(sum);
    std::vector<at::Tensor> parts;
    int64_t offset = 0;
    for (const at::Tensor& g : bucket.grads) {
      parts.push_back(sum[0].narrow(0, offset, g.numel()).view(g.sizes()));
      offset += g.numel();
    }
    CopyEach(bucket.grads, parts);
    return static_cast<int64_t>(sum[0].nbytes());
  }
  std::vector<int64_t> counts;
  for (int r = 0; r < zero_->shards(); ++r) {
    const auto [lo, hi] = zero_->Overlap(bucket.flat_begin, bucket.numel, r);
    counts.push_back(hi - lo);
  }
  const at::Tensor part = group_->ReduceScatterSum(sum[0], counts);  // flat [lo, hi)
  const int64_t lo = zero_->Overlap(bucket.flat_begin, bucket.numel, zero_->index()).first;
  int64_t offset = bucket.flat_begin;   // of gradient g
  std::vector<at::Tensor> kept, parts;  // the gradients' ranges here, and their sums
  for (const at::Tensor& g : bucket.grads) {
    const auto [from, to] = zero_->Overlap(offset, g.numel(), zero_->index());
    if (from < to) {
      kept.push_back(g.view({-1}).narrow(0, from - offset, to - from));
      parts.push_back(part.narrow(0, from - lo, to - from));
    }
    offset += g.numel();
  }
  CopyEach(kept, parts);
  return static_cast<int64_t>(part.nbytes());
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
