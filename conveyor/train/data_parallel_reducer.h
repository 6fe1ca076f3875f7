// Data-parallel gradient reduction that overlaps the pipeline.
//
// Each data-parallel replica trains on its own slice of the batch, with every micro-batch's
// loss divided by the whole batch's target count, so the step's gradient is the SUM of the
// replicas' gradients (an average when the slices count as many targets). At a stage's
// REDUCE_GRAD (its gradients are final, Executor::set_reduce_grad_hook) the trainer calls
// Start() with the stage's parameters: their gradients are cut into buckets of about
// `bucket_bytes` and summed over the DP group by a background thread, while the executor goes
// on with the rest of the step. Finish() waits for every bucket before the optimizer.
//
// ZeRO stage 1 (given a ShardLayout of this rank's parameters, shard_layout.h): the buckets of
// scattered parameters are reduce-scattered instead of all-reduced, so each replica receives
// and holds the summed gradient of only its own range of the flattened parameters (about
// 1/dp of them), which is all ShardedAdamW reads; the elements outside the range keep this
// replica's own, unsummed gradient. Such a bucket covers one contiguous run [a, a + n) of the
// flat vector, and the part of each replica is [a, a + n) intersected with its range. The
// gradients of the layout's whole parameters (shared ones) are all-reduced, in buckets of
// their own.
//
// All replicas start the same buckets in the same order (the same program and model on each),
// as the collectives require.
//
// CUDA gradients: a bucket is read on the reducer thread's stream only after the work that
// the rank's stream had enqueued when Start() was called (an event), and the reducer thread
// waits for its own stream after each bucket, so that once Finish() returns the gradients
// hold the sums for any stream; the rank's stream is never blocked meanwhile.
//
// Thread-safety: Start() and Finish() are called from one thread (the rank's); the group is
// used only by the reducer's own thread. REQUIRES: `group` outlives the reducer; between
// Start() and Finish() nobody touches the started parameters' gradients.
#ifndef CONVEYOR_TRAIN_DATA_PARALLEL_REDUCER_H_
#define CONVEYOR_TRAIN_DATA_PARALLEL_REDUCER_H_

#include <ATen/core/Tensor.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "conveyor/comm/transport.h"
#include "conveyor/device/stream_order.h"
#include "conveyor/module/stage_module.h"
#include "conveyor/optim/shard_layout.h"

namespace conveyor {

struct DataParallelStats {
  double comm_s = 0;     // time the buckets' reductions took, summed
  double exposed_s = 0;  // time Finish() waited: the part of comm_s not hidden by compute
  int64_t bytes = 0;     // gradient bytes reduced
  // Of `bytes`, those reduce-scattered (ZeRO-1; the rest was all-reduced), and of these the
  // bytes of this replica's range: the summed gradient it received.
  int64_t scattered_bytes = 0;
  int64_t scattered_kept_bytes = 0;
  int buckets = 0;

  // The share of the communication that overlapped compute, in [0, 1] (1 with none).
  double hidden_fraction() const;
  // Adds `other`'s counts and times (the reductions of several groups in one step).
  DataParallelStats& operator+=(const DataParallelStats& other);
};

class DataParallelReducer {
 public:
  // `group`: this rank's DP group (the replicas at its (tp, pp) coordinates), two ranks or
  // more. `zero`: null to all-reduce every gradient, or the ZeRO-1 layout of this rank's
  // parameters (shards = the group's size, index = its rank) to reduce-scatter the scattered
  // ones. Precondition: bucket_bytes >= 1.
  DataParallelReducer(Transport* group, int64_t bucket_bytes,
                      std::shared_ptr<const ShardLayout> zero = nullptr);
  // Stops the thread (after the buckets in flight: they never outlive their tensors).
  ~DataParallelReducer();

  // Queues the gradients of `params` (an undefined gradient becomes zeros first) and returns
  // at once. With a layout, `params` are among the layout's parameters, and their gradients
  // contiguous.
  void Start(const NamedTensors& params);

  // Waits until every started bucket is summed and written back into its gradients; returns
  // what this step's reduction cost, and resets it. Rethrows the first failure of the
  // reducer's thread (a CommError names the rank).
  DataParallelStats Finish();

 private:
  struct Bucket {
    std::vector<at::Tensor> grads;  // written back in place
    int64_t bytes = 0;
    int64_t numel = 0;
    // Reduce-scattered: the flat offset of the first gradient in the layout (the others
    // follow it without gaps); -1: all-reduced.
    int64_t flat_begin = -1;
    StreamMark ready;  // the gradients' producing work, on the rank's stream
  };
  void Loop();
  // Sums the bucket's gradients over the group, in place (all of them, or with a layout and
  // flat_begin >= 0, this replica's range of them) on the bucket's device, after its ready
  // mark, and waits for that; returns the bytes of the sum received.
  int64_t Reduce(const Bucket& bucket);
  int64_t ReduceOnCurrentStream(const Bucket& bucket);  // Reduce's work, on this thread's stream

  Transport* group_;
  int64_t bucket_bytes_;
  std::shared_ptr<const ShardLayout> zero_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Bucket> queue_;  // guarded by mu_
  int in_flight_ = 0;         // buckets queued or running; guarded by mu_
  bool stop_ = false;         // guarded by mu_
  std::exception_ptr error_;  // guarded by mu_
  DataParallelStats stats_;   // guarded by mu_
  std::thread thread_;
};

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_DATA_PARALLEL_REDUCER_H_
