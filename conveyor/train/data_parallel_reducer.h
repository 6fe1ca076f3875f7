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
// All replicas start the same buckets in the same order (the same program and model on each),
// as the collectives require.
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
#include <mutex>
#include <thread>
#include <vector>

#include "conveyor/comm/transport.h"
#include "conveyor/module/stage_module.h"

namespace conveyor {

struct DataParallelStats {
  double comm_s = 0;     // time the buckets' all-reduces took, summed
  double exposed_s = 0;  // time Finish() waited: the part of comm_s not hidden by compute
  int64_t bytes = 0;     // gradient bytes reduced
  int buckets = 0;

  // The share of the communication that overlapped compute, in [0, 1] (1 with none).
  double hidden_fraction() const;
};

class DataParallelReducer {
 public:
  // `group`: this rank's DP group (the replicas at its (tp, pp) coordinates), two ranks or
  // more. Precondition: bucket_bytes >= 1.
  DataParallelReducer(Transport* group, int64_t bucket_bytes);
  // Stops the thread (after the buckets in flight: they never outlive their tensors).
  ~DataParallelReducer();

  // Queues the gradients of `params` (an undefined gradient becomes zeros first) and returns
  // at once.
  void Start(const NamedTensors& params);

  // Waits until every started bucket is summed and written back into its gradients; returns
  // what this step's reduction cost, and resets it. Rethrows the first failure of the
  // reducer's thread (a CommError names the rank).
  DataParallelStats Finish();

 private:
  struct Bucket {
    std::vector<at::Tensor> grads;  // written back in place
    int64_t bytes = 0;
  };
  void Loop();

  Transport* group_;
  int64_t bucket_bytes_;
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
