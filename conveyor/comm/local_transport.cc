#include "conveyor/comm/local_transport.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <tuple>
#include <utility>

#include "conveyor/comm/abort_signal.h"
#include "conveyor/comm/scatter_parts.h"
#include "conveyor/common/error.h"
#include "conveyor/device/stream_order.h"

namespace conveyor {
namespace {

using Clock = std::chrono::steady_clock;

// One message or receive; guarded by its group's mutex.
struct Slot {
  at::Tensor tensor;  // a receive's buffer, or an unmatched send's copy
  std::uint32_t tag = 0;
  bool done = false;
  std::string error;  // set when done and the transfer failed
  // On CUDA: a receive's buffer is free to be written after `ready` (its poster's stream)
  // and holds the message after `written` (the deliverer's stream); an unmatched send's
  // copy is complete after `ready` (the sender's stream).
  StreamMark ready;
  StreamMark written;
};

// (src, dst, tag), group ranks; the tag is 0 when messages match by order.
using Key = std::tuple<int, int, std::uint32_t>;

// One collective call, met by every rank of the group.
struct Collective {
  const char* op = nullptr;
  // All-reduce: the running sums. All-gather and reduce-scatter: each rank's operand, by
  // rank. Broadcast: the root's operand alone.
  std::vector<at::Tensor> tensors;
  // All-gather, reduce-scatter, all-to-all and broadcast: the first rank to arrive, its
  // operand's shape and dtype (a tensor on the meta device; all-to-all: one row of it), its
  // root (broadcast) and its counts (reduce-scatter).
  int first_rank = -1;
  at::Tensor like;
  int root = -1;
  std::vector<int64_t> counts;
  // All-to-all: every arrived rank's send and receive counts, by rank.
  std::vector<std::vector<int64_t>> sends, receives;
  std::vector<bool> arrived;
  int count = 0;
  int readers_left = 0;
  std::string error;
};

struct Group;

struct SubgroupEntry {
  std::vector<int> ranks;
  std::shared_ptr<Group> group;
};

// State shared by the members of one group.
struct Group {
  explicit Group(std::shared_ptr<AbortSignal> abort_signal) : abort(std::move(abort_signal)) {
    wake = abort->Subscribe([this] {
      std::lock_guard<std::mutex> lock(mutex);
      cv.notify_all();
    });
  }

  std::mutex mutex;
  std::condition_variable cv;
  std::map<Key, std::deque<std::shared_ptr<Slot>>> unmatched_sends;
  std::map<Key, std::deque<std::shared_ptr<Slot>>> pending_recvs;
  std::map<std::uint64_t, Collective> collectives;
  std::map<std::uint64_t, SubgroupEntry> subgroups;
  std::shared_ptr<AbortSignal> abort;
  AbortSignal::Subscription wake;  // declared last: unsubscribes before the rest goes
};

bool SameShapeAndDtype(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type();
}

// "shape [2, 3] and dtype Float"
std::string ShapeAndDtype(const at::Tensor& t) {
  std::ostringstream out;
  out << "shape " << t.sizes() << " and dtype " << t.scalar_type();
  return out.str();
}

std::string Mismatch(const at::Tensor& got, const at::Tensor& expected, const char* what) {
  if (SameShapeAndDtype(got, expected)) return "";
  return "got a tensor of " + ShapeAndDtype(got) + " for " + what + " of " +
         ShapeAndDtype(expected);
}

// Copies a message of tag `tag`, complete after `message_ready`, into a receive and completes
// it, on the calling thread's stream. Requires the group's mutex.
void Deliver(const at::Tensor& message, const StreamMark& message_ready, std::uint32_t tag,
             Slot& recv) {
  if (tag != recv.tag) {
    recv.error = "matched by order a message of tag " + std::to_string(tag) +
                 ": the two ranks post their messages in different orders";
  } else {
    recv.error = Mismatch(message, recv.tensor, "a receive buffer");
  }
  if (recv.error.empty()) {
    recv.ready.MakeCurrentStreamWait();
    message_ready.MakeCurrentStreamWait();
    recv.tensor.copy_(message);
    recv.written = StreamMark::Here(recv.tensor.device());
    RecordCurrentStreamUse(recv.tensor);  // the receiver frees it, on its own stream
  }
  recv.done = true;
}

std::shared_ptr<Slot> PopFront(std::map<Key, std::deque<std::shared_ptr<Slot>>>& queues,
                               const Key& key) {
  auto it = queues.find(key);
  if (it == queues.end()) return nullptr;
  std::shared_ptr<Slot> slot = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) queues.erase(it);
  return slot;
}

// Ends a failed wait: publishes `message` to the world and throws it.
[[noreturn]] void Fail(AbortSignal& abort, const std::string& message) {
  abort.Trigger(message);
  throw CommError(message);
}

std::string TimedOut(std::chrono::milliseconds timeout) {
  return " timed out after " + std::to_string(timeout.count()) + " ms";
}

class LocalWork : public Work {
 public:
  LocalWork(std::shared_ptr<Group> group, std::shared_ptr<Slot> slot, std::string what,
            std::chrono::milliseconds timeout)
      : group_(std::move(group)),
        slot_(std::move(slot)),
        what_(std::move(what)),
        timeout_(timeout) {}

  void Wait() override {
    std::unique_lock<std::mutex> lock(group_->mutex);
    AbortSignal& abort = *group_->abort;
    group_->cv.wait_until(lock, Clock::now() + timeout_,
                          [&] { return slot_->done || abort.triggered(); });
    if (slot_->done && slot_->error.empty()) {
      slot_->written.MakeCurrentStreamWait();
      return;
    }
    std::string error = slot_->error;
    lock.unlock();
    if (!error.empty()) Fail(abort, what_ + " failed: " + error);
    if (abort.triggered()) throw CommError(what_ + " aborted: " + abort.reason(), true);
    Fail(abort, what_ + TimedOut(timeout_) + " (no matching send)");
  }

  bool IsCompleted() override {
    std::lock_guard<std::mutex> lock(group_->mutex);
    return slot_->done;
  }

 private:
  std::shared_ptr<Group> group_;
  std::shared_ptr<Slot> slot_;
  std::string what_;
  std::chrono::milliseconds timeout_;
};

class LocalTransport : public Transport {
 public:
  LocalTransport(std::shared_ptr<Group> group, GroupRanks ranks, TransportOptions options)
      : group_(std::move(group)), ranks_(std::move(ranks)), options_(options) {}

  int rank() const override { return ranks_.rank(); }
  int world_size() const override { return ranks_.size(); }

  std::shared_ptr<Work> Send(at::Tensor tensor, int dst, std::uint32_t tag) override {
    ranks_.CheckPeer("send", dst, tag);
    auto slot = std::make_shared<Slot>();
    slot->done = true;
    {
      std::lock_guard<std::mutex> lock(group_->mutex);
      Key key{rank(), dst, MatchTag(tag)};
      if (std::shared_ptr<Slot> recv = PopFront(group_->pending_recvs, key)) {
        Deliver(tensor, StreamMark(), tag, *recv);
        group_->cv.notify_all();
      } else {
        auto message = std::make_shared<Slot>();
        message->tensor = tensor.clone(at::MemoryFormat::Contiguous);
        message->ready = StreamMark::Here(tensor.device());
        message->tag = tag;
        group_->unmatched_sends[key].push_back(std::move(message));
      }
    }
    return std::make_shared<LocalWork>(group_, std::move(slot), Describe("send", "to", dst, tag),
                                       options_.timeout);
  }

  std::shared_ptr<Work> Recv(at::Tensor buffer, int src, std::uint32_t tag) override {
    ranks_.CheckPeer("recv", src, tag);
    CONVEYOR_CHECK(buffer.defined() && buffer.is_contiguous())
        << Describe("recv", "from", src, tag) << ": the buffer must be a contiguous tensor";
    auto slot = std::make_shared<Slot>();
    slot->ready = StreamMark::Here(buffer.device());
    slot->tensor = std::move(buffer);
    slot->tag = tag;
    {
      std::lock_guard<std::mutex> lock(group_->mutex);
      Key key{src, rank(), MatchTag(tag)};
      if (std::shared_ptr<Slot> message = PopFront(group_->unmatched_sends, key)) {
        Deliver(message->tensor, message->ready, message->tag, *slot);
        RecordCurrentStreamUse(message->tensor);  // made on the sender's stream, freed here
      } else {
        group_->pending_recvs[key].push_back(slot);
      }
    }
    return std::make_shared<LocalWork>(group_, std::move(slot), Describe("recv", "from", src, tag),
                                       options_.timeout);
  }

  void AllReduceSum(std::vector<at::Tensor>& tensors) override;
  at::Tensor ReduceScatterSum(const at::Tensor& input, const std::vector<int64_t>& counts) override;
  std::vector<at::Tensor> AllGather(const at::Tensor& local) override;
  at::Tensor AllToAll(const at::Tensor& input, const std::vector<int64_t>& send_counts,
                      const std::vector<int64_t>& recv_counts) override;
  void Broadcast(at::Tensor& tensor, int root) override;

  void Barrier() override {
    Meet(
        "barrier", c10::Device(c10::DeviceType::CPU), [](Collective&) { return std::string(); },
        [](const Collective&) {});
  }

  std::unique_ptr<Transport> NewGroup(const std::vector<int>& ranks) override {
    GroupRanks sub = ranks_.Subgroup(ranks);
    std::uint64_t seq = next_subgroup_++;
    std::shared_ptr<Group> group;
    {
      std::lock_guard<std::mutex> lock(group_->mutex);
      SubgroupEntry& entry = group_->subgroups[seq];
      if (entry.group == nullptr) {
        entry.ranks = ranks;
        entry.group = std::make_shared<Group>(group_->abort);
      }
      CONVEYOR_CHECK(entry.ranks == ranks)
          << ranks_.Self() << ": NewGroup call #" << seq
          << " names other ranks than the same call on another rank (every rank must pass "
             "the same ranks in the same order)";
      group = entry.group;
    }
    if (!sub.member()) return nullptr;
    return std::make_unique<LocalTransport>(std::move(group), std::move(sub), options_);
  }

  void ReportFailure(const std::string& message) noexcept override {
    group_->abort->Trigger(ranks_.Self() + " failed: " + message);
  }

 private:
  // The tag messages are matched by.
  std::uint32_t MatchTag(std::uint32_t tag) const { return options_.match_by_order ? 0 : tag; }

  std::string Describe(const char* op, const char* direction, int peer, std::uint32_t tag) const {
    return ranks_.Describe(op, direction, peer, tag);
  }

  // Adds this rank's operands to the collective (under the group's mutex); returns what is
  // wrong with them, or "".
  using Contribute = std::function<std::string(Collective&)>;
  // Takes this rank's result from the collective that every rank has contributed to (under
  // the group's mutex).
  using Read = std::function<void(const Collective&)>;

  // Meets the other ranks at this transport's next collective, `op`: contributes, waits until
  // every rank has, then reads. Throws CommError when the ranks disagree (on the operation,
  // or as a Contribute says), on timeout and on abort. With operands on a CUDA `device`, the
  // calling thread's stream is synchronised before contributing, after contributing and after
  // reading, so that no rank reads a shared tensor before it is written or frees one another
  // still reads.
  void Meet(const char* op, const c10::Device& device, const Contribute& contribute,
            const Read& read);

  // What Contribute returns when this rank's operand differs from the first rank's, whose
  // shape and dtype `c` keeps ("" when it does not; the first rank records it).
  std::string CheckLikeFirst(Collective& c, const at::Tensor& operand) const;

  std::shared_ptr<Group> group_;
  GroupRanks ranks_;
  TransportOptions options_;
  std::uint64_t next_collective_ = 0;
  std::uint64_t next_subgroup_ = 0;
};

void LocalTransport::Meet(const char* op, const c10::Device& device, const Contribute& contribute,
                          const Read& read) {
  SynchronizeCurrentStream(device);
  std::string what = ranks_.Self() + ": " + op + " #" + std::to_string(next_collective_);
  std::unique_lock<std::mutex> lock(group_->mutex);
  Collective& c = group_->collectives[next_collective_++];
  if (c.op == nullptr) {
    c.op = op;
    c.arrived.assign(world_size(), false);
    c.readers_left = world_size();
  }
  if (std::string(c.op) != op) {
    c.error = std::string("ranks disagree on the operation: ") + c.op + " and " + op;
  } else if (c.error.empty()) {
    c.error = contribute(c);
    SynchronizeCurrentStream(device);
  }
  c.arrived[rank()] = true;
  if (++c.count == world_size()) group_->cv.notify_all();
  AbortSignal& abort = *group_->abort;
  group_->cv.wait_until(lock, Clock::now() + options_.timeout,
                        [&] { return c.count == world_size() || abort.triggered(); });
  if (c.count == world_size() && c.error.empty()) {
    read(c);
    SynchronizeCurrentStream(device);
    if (--c.readers_left == 0) group_->collectives.erase(next_collective_ - 1);
    return;
  }
  std::string failure;
  if (!c.error.empty()) {
    failure = what + " failed: " + c.error;
  } else if (!abort.triggered()) {
    std::ostringstream missing;
    for (int r = 0; r < world_size(); ++r) {
      if (!c.arrived[r]) missing << " " << ranks_.world_rank(r);
    }
    failure = what + TimedOut(options_.timeout) + " waiting for ranks" + missing.str();
  }
  lock.unlock();
  if (failure.empty()) throw CommError(what + " aborted: " + abort.reason(), true);
  Fail(abort, failure);
}

std::string LocalTransport::CheckLikeFirst(Collective& c, const at::Tensor& operand) const {
  if (c.first_rank < 0) {
    c.first_rank = rank();
    c.like = at::empty(operand.sizes(), operand.options().device(at::kMeta));
    return "";
  }
  if (SameShapeAndDtype(operand, c.like)) return "";
  return "rank " + std::to_string(ranks_.my_world_rank()) + " passes a tensor of " +
         ShapeAndDtype(operand) + ", rank " + std::to_string(ranks_.world_rank(c.first_rank)) +
         " one of " + ShapeAndDtype(c.like) + " (every rank must pass the same)";
}

void LocalTransport::AllReduceSum(std::vector<at::Tensor>& tensors) {
  Meet(
      "all-reduce", tensors.empty() ? c10::Device(c10::DeviceType::CPU) : tensors[0].device(),
      [&](Collective& c) -> std::string {
        if (c.count == 0) {
          for (const at::Tensor& t : tensors) {
            c.tensors.push_back(t.clone(at::MemoryFormat::Contiguous));
          }
          return "";
        }
        if (c.tensors.size() != tensors.size()) {
          return "ranks pass " + std::to_string(c.tensors.size()) + " and " +
                 std::to_string(tensors.size()) + " tensors";
        }
        for (size_t i = 0; i < tensors.size(); ++i) {
          std::string error =
              Mismatch(tensors[i], c.tensors[i], ("operand " + std::to_string(i)).c_str());
          if (!error.empty()) return error;
          c.tensors[i].add_(tensors[i].to(c.tensors[i].device()));
        }
        return "";
      },
      [&](const Collective& c) {
        for (size_t i = 0; i < tensors.size(); ++i) tensors[i].copy_(c.tensors[i]);
      });
}

at::Tensor LocalTransport::ReduceScatterSum(const at::Tensor& input,
                                            const std::vector<int64_t>& counts) {
  const ScatterParts parts(ranks_, input, counts);
  at::Tensor mine;
  Meet(
      "reduce-scatter", input.device(),
      [&](Collective& c) {
        std::string error = CheckLikeFirst(c, input);
        if (!error.empty()) return error;
        if (c.first_rank == rank()) c.counts = counts;
        if (c.counts != counts) {
          return "rank " + std::to_string(ranks_.my_world_rank()) + " passes counts " +
                 ScatterParts::Format(counts) + ", rank " +
                 std::to_string(ranks_.world_rank(c.first_rank)) + " counts " +
                 ScatterParts::Format(c.counts) + " (every rank must pass the same)";
        }
        c.tensors.resize(world_size());
        c.tensors[rank()] = input.detach().clone(at::MemoryFormat::Contiguous);
        return std::string();
      },
      [&](const Collective& c) {
        // Only this rank's part of every rank's operand is read.
        mine = at::zeros({parts.count(rank())}, input.options());
        for (const at::Tensor& t : c.tensors) mine.add_(parts.Of(t, rank()).to(input.device()));
      });
  return mine;
}

std::vector<at::Tensor> LocalTransport::AllGather(const at::Tensor& local) {
  CONVEYOR_CHECK(local.defined()) << ranks_.Self() << ": all-gather of an undefined tensor";
  std::vector<at::Tensor> gathered;
  Meet(
      "all-gather", local.device(),
      [&](Collective& c) {
        std::string error = CheckLikeFirst(c, local);
        if (error.empty()) {
          c.tensors.resize(world_size());
          c.tensors[rank()] = local.detach().clone(at::MemoryFormat::Contiguous);
        }
        return error;
      },
      [&](const Collective& c) {
        for (const at::Tensor& t : c.tensors) {
          gathered.push_back(t.to(local.options(), /*non_blocking=*/false, /*copy=*/true,
                                  at::MemoryFormat::Contiguous));
        }
      });
  return gathered;
}

at::Tensor LocalTransport::AllToAll(const at::Tensor& input,
                                    const std::vector<int64_t>& send_counts,
                                    const std::vector<int64_t>& recv_counts) {
  ScatterParts::AllToAllReceived(ranks_, input, send_counts, recv_counts);
  // "rank 2 sends 3 rows to rank 0, which receives 1 from it".
  auto pair = [&](int sender, int receiver, int64_t sent, int64_t received) {
    return "rank " + std::to_string(ranks_.world_rank(sender)) + " sends " + std::to_string(sent) +
           " rows to rank " + std::to_string(ranks_.world_rank(receiver)) + ", which receives " +
           std::to_string(received) +
           " from it (every rank's send count must be its peer's receive count)";
  };
  at::Tensor output;
  Meet(
      "all-to-all", input.device(),
      [&](Collective& c) {
        // A row's shape and dtype, like the first rank's.
        std::string error =
            CheckLikeFirst(c, at::empty(input.sizes().slice(1), input.options().device(at::kMeta)));
        if (!error.empty()) return error;
        c.tensors.resize(world_size());
        c.sends.resize(world_size());
        c.receives.resize(world_size());
        c.tensors[rank()] = input.detach().clone(at::MemoryFormat::Contiguous);
        c.sends[rank()] = send_counts;
        c.receives[rank()] = recv_counts;
        // Every pair is checked by the later of its two ranks to arrive.
        for (int r = 0; r < world_size(); ++r) {
          if (!c.sends[r].empty() && c.sends[r][rank()] != recv_counts[r]) {
            return pair(r, rank(), c.sends[r][rank()], recv_counts[r]);
          }
          if (!c.receives[r].empty() && send_counts[r] != c.receives[r][rank()]) {
            return pair(rank(), r, send_counts[r], c.receives[r][rank()]);
          }
        }
        return std::string();
      },
      [&](const Collective& c) {
        std::vector<at::Tensor> parts;
        for (int r = 0; r < world_size(); ++r) {
          int64_t begin = 0;
          for (int k = 0; k < rank(); ++k) begin += c.sends[r][k];
          parts.push_back(c.tensors[r].narrow(0, begin, c.sends[r][rank()]).to(input.device()));
        }
        output = at::cat(parts, 0);
      });
  return output;
}

void LocalTransport::Broadcast(at::Tensor& tensor, int root) {
  ranks_.CheckRoot("broadcast", root);
  CONVEYOR_CHECK(tensor.defined()) << ranks_.Self() << ": broadcast of an undefined tensor";
  Meet(
      "broadcast", tensor.device(),
      [&](Collective& c) {
        std::string error = CheckLikeFirst(c, tensor);
        if (!error.empty()) return error;
        if (c.first_rank == rank()) c.root = root;
        if (c.root != root) {
          return "rank " + std::to_string(ranks_.my_world_rank()) + " broadcasts from rank " +
                 std::to_string(ranks_.world_rank(root)) + ", rank " +
                 std::to_string(ranks_.world_rank(c.first_rank)) + " from rank " +
                 std::to_string(ranks_.world_rank(c.root)) +
                 " (every rank must name the same root)";
        }
        if (rank() == root) c.tensors = {tensor.detach().clone(at::MemoryFormat::Contiguous)};
        return std::string();
      },
      [&](const Collective& c) {
        if (rank() != root) tensor.copy_(c.tensors[0]);
      });
}

}  // namespace

std::vector<std::unique_ptr<Transport>> LocalWorld(int n, const TransportOptions& options) {
  CONVEYOR_CHECK(n >= 1) << "a local world needs at least one rank, got " << n;
  auto group = std::make_shared<Group>(AbortSignal::Create());
  std::vector<std::unique_ptr<Transport>> world;
  for (int r = 0; r < n; ++r) {
    world.push_back(std::make_unique<LocalTransport>(group, GroupRanks::World(n, r), options));
  }
  return world;
}

}  // namespace conveyor
