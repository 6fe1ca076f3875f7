// Deferred weight-gradient work, keyed by micro-batch: the mechanism behind split backward.
//
// A backward-for-inputs (I) runs autograd while the store defers: layers that support it
// (Linear) compute their input gradient at once and queue the weight-gradient GEMM as a
// task under the micro-batch's key; the backward-for-weights (W) runs those tasks. A full
// backward (B) simply does not defer. Parameters of other layers get their gradients
// during I (they are cheap).
//
// Layers learn where to queue at forward time: a Recording scope on the forward's thread
// names the store and key, and the layer keeps them for its backward, which may run on
// another thread (the autograd engine's).
//
// Thread-safety: Add/Run/Defer may be called from any thread (one mutex); tasks of one key
// run in FIFO order on the caller of Run.
//
// Lifetimes: a layer keeps a raw pointer to the store it recorded at forward time until its
// backward ran, and queued tasks hold the tensors they need. REQUIRES: the store outlives
// every backward of the forwards recorded into it, and a key's tasks are Run (or the store
// destroyed) before the tensors' owners expect them freed. Stage owns its store, and the
// executor runs W for every micro-batch before the step ends.
#ifndef CONVEYOR_MODULE_WEIGHT_GRAD_STORE_H_
#define CONVEYOR_MODULE_WEIGHT_GRAD_STORE_H_

#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>

namespace conveyor {

class WeightGradStore {
 public:
  using Task = std::function<void()>;

  // While alive, forwards on this thread record (store, key) for their backward.
  // REQUIRES: `store` outlives the Recording; Recordings nest (LIFO) on one thread.
  class Recording {
   public:
    Recording(WeightGradStore* store, int key);
    ~Recording();
    Recording(const Recording&) = delete;
    Recording& operator=(const Recording&) = delete;

   private:
    WeightGradStore* previous_store_;
    int previous_key_;
  };

  // The store and key recorded on this thread, or nullptr outside a Recording.
  static WeightGradStore* RecordingStore();
  static int RecordingKey();

  // While deferring `key`, backward passes of that key queue their weight work.
  void SetDeferring(int key, bool defer);
  bool deferring(int key) const;

  void Add(int key, Task task);
  // Runs (then drops) every task queued under `key`, oldest first. Returns how many ran.
  int Run(int key);
  // Tasks waiting under `key`; all keys when key < 0.
  size_t pending(int key = -1) const;

 private:
  mutable std::mutex mutex_;
  std::set<int> deferring_;
  std::map<int, std::deque<Task>> tasks_;
};

}  // namespace conveyor

#endif  // CONVEYOR_MODULE_WEIGHT_GRAD_STORE_H_
