#include "conveyor/module/weight_grad_store.h"

namespace conveyor {
namespace {

thread_local WeightGradStore* recording_store = nullptr;
thread_local int recording_key = -1;

}  // namespace

WeightGradStore::Recording::Recording(WeightGradStore* store, int key)
    : previous_store_(recording_store), previous_key_(recording_key) {
  recording_store = store;
  recording_key = key;
}

WeightGradStore::Recording::~Recording() {
  recording_store = previous_store_;
  recording_key = previous_key_;
}

WeightGradStore* WeightGradStore::RecordingStore() { return recording_store; }
int WeightGradStore::RecordingKey() { return recording_key; }

void WeightGradStore::SetDeferring(int key, bool defer) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (defer) {
    deferring_.insert(key);
  } else {
    deferring_.erase(key);
  }
}

bool WeightGradStore::deferring(int key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return deferring_.count(key) > 0;
}

void WeightGradStore::Add(int key, Task task) {
  std::lock_guard<std::mutex> lock(mutex_);
  tasks_[key].push_back(std::move(task));
}

int WeightGradStore::Run(int key) {
  std::deque<Task> tasks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = tasks_.find(key);
    if (it == tasks_.end()) return 0;
    tasks = std::move(it->second);
    tasks_.erase(it);
  }
  for (Task& task : tasks) task();
  return static_cast<int>(tasks.size());
}

size_t WeightGradStore::pending(int key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (key >= 0) {
    auto it = tasks_.find(key);
    return it == tasks_.end() ? 0 : it->second.size();
  }
  size_t total = 0;
  for (const auto& [k, tasks] : tasks_) total += tasks.size();
  return total;
}

}  // namespace conveyor
