#include "conveyor/comm/c10d_transport.h"

#include <ATen/ATen.h>
#include <torch/version.h>

#include <cstdlib>
#include <functional>
#include <map>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <utility>

#include "conveyor/comm/c10d_compat.h"
#include "conveyor/comm/c10d_world.h"
#include "conveyor/comm/host_sockets.h"
#include "conveyor/comm/scatter_parts.h"
#include "conveyor/common/error.h"

// Version differences of libtorch live here and nowhere else. Since 2.0 the Gloo and NCCL
// process groups derive from c10d::Backend (1.13: from c10d::ProcessGroup); both versions keep
// the send / recv / allreduce / barrier signatures used below. ProcessGroupNCCL.hpp declares
// its class only under USE_C10D_NCCL, which CMake defines with CONVEYOR_WITH_NCCL for CUDA
// builds of libtorch.
#if defined(CONVEYOR_WITH_NCCL) && __has_include(<torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>)
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#define CONVEYOR_HAS_NCCL 1
#else
#define CONVEYOR_HAS_NCCL 0
#endif

namespace conveyor {
namespace {

#if TORCH_VERSION_MAJOR >= 2
using ProcessGroupBase = c10d::Backend;
#else
using ProcessGroupBase = c10d::ProcessGroup;
#endif

// The process groups of one group of ranks; shared with its operations in flight.
struct Backends {
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo;
#if CONVEYOR_HAS_NCCL
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> nccl;
  ~Backends() {
    if (nccl) ShutDownProcessGroup(*nccl);
  }
#endif
};

std::shared_ptr<::gloo::transport::Device> GlooDevice(const std::string& master_addr) {
  if (const char* interface = std::getenv("GLOO_SOCKET_IFNAME")) {
    return c10d::ProcessGroupGloo::createDeviceForInterface(interface);
  }
  if (IsLoopback(master_addr)) {
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  }
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

#if CONVEYOR_HAS_NCCL
// Creates every NCCL communicator now: the group's, then one per pair of ranks, pairs in
// one global order that every rank walks (so no two ranks wait on each other in a cycle).
void ConnectNcclPairs(c10d::ProcessGroupNCCL& nccl, int rank, int size) {
  std::vector<at::Tensor> one = {at::ones({1}, at::TensorOptions().device(at::kCUDA))};
  nccl.allreduce(one)->wait();
  for (int a = 0; a < size; ++a) {
    for (int b = a + 1; b < size; ++b) {
      if (rank == a) nccl.send(one, b, 0)->wait();
      if (rank == b) nccl.recv(one, a, 0)->wait();
    }
  }
}
#endif

std::shared_ptr<Backends> Connect(C10dWorld& world, const std::string& prefix,
                                  const GroupRanks& ranks) {
  auto backends = std::make_shared<Backends>();
  ShmChannel::Background keep_moving = world.KeepShmMoving();
  try {
    auto options = c10d::ProcessGroupGloo::Options::create(world.options().transport.timeout);
    options->devices.push_back(GlooDevice(world.info().master_addr));
    backends->gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>(prefix + "/gloo", world.store()), ranks.rank(),
        ranks.size(), options);
#if CONVEYOR_HAS_NCCL
    if (world.options().use_nccl) {
      auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
      nccl_options->timeout = world.options().transport.timeout;
      backends->nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(
          c10::make_intrusive<c10d::PrefixStore>(prefix + "/nccl", world.store()), ranks.rank(),
          ranks.size(), nccl_options);
      ConnectNcclPairs(*backends->nccl, ranks.rank(), ranks.size());
    }
#endif
  } catch (const std::exception& e) {
    std::string what = ranks.Self() + ": connecting the process groups of " +
                       std::to_string(ranks.size()) + " ranks";
    world.Raise(what, what + " failed: " + Brief(e));
  }
  return backends;
}

class C10dWork : public Work {
 public:
  C10dWork(std::shared_ptr<C10dWorld> world, C10dOp op)
      : world_(std::move(world)), op_(std::move(op)) {}

  ~C10dWork() override {
    if (state_ == State::kPending) world_->Adopt(std::move(op_));
  }

  void Wait() override {
    if (state_ == State::kDone) return;
    if (state_ == State::kFailed) throw CommError(error_);
    try {
      world_->Wait(op_);
      state_ = State::kDone;
    } catch (const CommError& e) {
      state_ = State::kFailed;
      error_ = e.what();
      throw;
    }
  }

  bool IsCompleted() override {
    return state_ == State::kDone || (op_.pollable && state_ == State::kPending &&
                                      op_.work->isCompleted() && op_.work->isSuccess());
  }

 private:
  enum class State { kPending, kDone, kFailed };
  std::shared_ptr<C10dWorld> world_;
  C10dOp op_;
  State state_ = State::kPending;
  std::string error_;
};

// A point-to-point operation through the shared-memory channel.
class ShmWork : public Work {
 public:
  ShmWork(std::shared_ptr<C10dWorld> world, std::shared_ptr<ShmChannel::Op> op, std::string what)
      : world_(std::move(world)), op_(std::move(op)), what_(std::move(what)) {}

  void Wait() override {
    if (state_ == State::kDone) return;
    if (state_ == State::kFailed) throw CommError(error_);
    ShmChannel::Outcome outcome = world_->shm()->Wait(*op_, world_->options().transport.timeout);
    if (outcome.status == ShmChannel::Status::kDone) {
      state_ = State::kDone;
      return;
    }
    state_ = State::kFailed;
    try {
      switch (outcome.status) {
        case ShmChannel::Status::kAborted:
          throw CommError(what_ + " aborted: " + world_->abort().reason(), true);
        case ShmChannel::Status::kTimedOut:
          world_->Raise(what_, what_ + " timed out after " +
                                   std::to_string(world_->options().transport.timeout.count()) +
                                   " ms");
        default:
          world_->Raise(what_, what_ + " failed: " + outcome.detail);
      }
    } catch (const CommError& e) {
      error_ = e.what();
      throw;
    }
  }

  bool IsCompleted() override {
    if (state_ == State::kPending && world_->shm()->Test(*op_)) state_ = State::kDone;
    return state_ == State::kDone;
  }

 private:
  enum class State { kPending, kDone, kFailed };
  std::shared_ptr<C10dWorld> world_;
  std::shared_ptr<ShmChannel::Op> op_;  // stays posted in the channel when dropped
  std::string what_;
  State state_ = State::kPending;
  std::string error_;
};

// Shared-memory tags: a group's own 32-bit tag below, the group above it (the world 0, its
// sub-group number n: n + 1), so that no two groups' messages between the same two ranks
// can match. Groups of sub-groups do not use shared memory.
constexpr std::uint64_t kNoShm = ~std::uint64_t{0};

class C10dTransport : public Transport {
 public:
  C10dTransport(std::shared_ptr<C10dWorld> world, GroupRanks ranks, std::string prefix,
                bool is_world, std::uint64_t shm_space)
      : world_(std::move(world)),
        ranks_(std::move(ranks)),
        prefix_(std::move(prefix)),
        is_world_(is_world),
        shm_space_(shm_space),
        backends_(Connect(*world_, prefix_, ranks_)) {
    if (is_world_) world_->ConnectShm();
  }

  ~C10dTransport() override {
    if (!is_world_) return;
    if (world_->shm() && !world_->abort().triggered()) {
      world_->shm()->Flush(world_->options().transport.timeout);  // dropped sends
    }
    world_->Shutdown();
  }

  int rank() const override { return ranks_.rank(); }
  int world_size() const override { return ranks_.size(); }

  std::shared_ptr<Work> Send(at::Tensor tensor, int dst, std::uint32_t tag) override {
    ranks_.CheckPeer("send", dst, tag);
    if (UsesShm(tensor, dst)) {
      return ShmSend(tensor, dst, shm_space_ | tag, ranks_.Describe("send", "to", dst, tag));
    }
    std::vector<at::Tensor> tensors = {tensor.contiguous()};
    return Post(ranks_.Describe("send", "to", dst, tag), tensors,
                [&](ProcessGroupBase& pg) { return pg.send(tensors, dst, static_cast<int>(tag)); });
  }

  std::shared_ptr<Work> Recv(at::Tensor buffer, int src, std::uint32_t tag) override {
    ranks_.CheckPeer("recv", src, tag);
    std::string what = ranks_.Describe("recv", "from", src, tag);
    CONVEYOR_CHECK(buffer.defined() && buffer.is_contiguous())
        << what << ": the buffer must be a contiguous tensor";
    if (UsesShm(buffer, src)) return ShmRecv(buffer, src, shm_space_ | tag, std::move(what));
    std::vector<at::Tensor> tensors = {buffer};
    return Post(what, tensors,
                [&](ProcessGroupBase& pg) { return pg.recv(tensors, src, static_cast<int>(tag)); });
  }

  void AllReduceSum(std::vector<at::Tensor>& tensors) override;
  at::Tensor ReduceScatterSum(const at::Tensor& input, const std::vector<int64_t>& counts) override;
  std::vector<at::Tensor> AllGather(const at::Tensor& local) override;
  at::Tensor AllToAll(const at::Tensor& input, const std::vector<int64_t>& send_counts,
                      const std::vector<int64_t>& recv_counts) override;
  void Broadcast(at::Tensor& tensor, int root) override;

  void Barrier() override {
    Run(ranks_.Self() + ": barrier", at::Tensor(),
        [&](ProcessGroupBase& pg) { return pg.barrier(); });
  }

  std::unique_ptr<Transport> NewGroup(const std::vector<int>& ranks) override {
    GroupRanks sub = ranks_.Subgroup(ranks);
    const std::uint64_t n = next_group_++;
    std::string prefix = prefix_ + "/g" + std::to_string(n);
    if (!sub.member()) return nullptr;
    const std::uint64_t space =
        is_world_ && n + 1 < (std::uint64_t{1} << 32) ? (n + 1) << 32 : kNoShm;
    return std::make_unique<C10dTransport>(world_, std::move(sub), std::move(prefix), false, space);
  }

  void ReportFailure(const std::string& message) noexcept override {
    world_->Fail(ranks_.Self() + " failed: " + message);
  }

 private:
  using Launch = std::function<c10::intrusive_ptr<c10d::Work>(ProcessGroupBase&)>;

  // Whether a message of `tensor` to or from `peer` (a rank of this group) goes through
  // shared memory: CPU tensors, the world or one of its sub-groups, a peer on this host.
  bool UsesShm(const at::Tensor& tensor, int peer) const {
    return shm_space_ != kNoShm && world_->shm() && tensor.defined() && tensor.is_cpu() &&
           world_->shm()->Reaches(ranks_.world_rank(peer));
  }

  // Posts a send of `tensor` to / a receive into `buffer` from group rank `peer` on the
  // shared-memory channel under the whole 64-bit `tag`.
  std::shared_ptr<Work> ShmSend(const at::Tensor& tensor, int peer, std::uint64_t tag,
                                std::string what) {
    ThrowIfAborted(what);
    auto data = std::make_shared<at::Tensor>(tensor.contiguous());
    const void* bytes = data->data_ptr();
    const std::size_t nbytes = data->nbytes();
    auto op = world_->shm()->Send(bytes, nbytes, ranks_.world_rank(peer), tag, std::move(data));
    return std::make_shared<ShmWork>(world_, std::move(op), std::move(what));
  }
  std::shared_ptr<Work> ShmRecv(const at::Tensor& buffer, int peer, std::uint64_t tag,
                                std::string what) {
    ThrowIfAborted(what);
    auto op = world_->shm()->Recv(buffer.data_ptr(), buffer.nbytes(), ranks_.world_rank(peer), tag,
                                  std::make_shared<at::Tensor>(buffer));
    return std::make_shared<ShmWork>(world_, std::move(op), std::move(what));
  }

  // Whether every other member is reached through shared memory with `tensor` (the same on
  // every member: the channel joins the ranks of one host that all take part).
  bool ShmReachesAll(const at::Tensor& tensor) const {
    for (int r = 0; r < world_size(); ++r) {
      if (r != rank() && !UsesShm(tensor, r)) return false;
    }
    return true;
  }

  // The sum over the group of part rank() of `flat` (1-D, contiguous; `parts` its split),
  // by a ring of point-to-point messages (through RingExchange).
  at::Tensor RingReduceScatter(const std::string& what, const at::Tensor& flat,
                               const ScatterParts& parts);
  // Sums `flat` (1-D, contiguous, on the CPU) over the group in place, through shared
  // memory. Precondition: ShmReachesAll(flat).
  void ShmAllReduce(const std::string& what, const at::Tensor& flat);
  // Fills every part of `flat` (1-D, contiguous; `parts` its split) on every rank from the
  // rank holding it (part rank() filled in beforehand), by a ring of point-to-point messages
  // through shared memory. Precondition: ShmReachesAll(flat).
  void ShmRingAllGather(const std::string& what, const at::Tensor& flat, const ScatterParts& parts);
  // One step of a ring: posts the receive of `recv` from `left` and the send of `send` to
  // `right` (each skipped when empty), through shared memory when `shm` (else on ring_),
  // and waits for both.
  void RingExchange(const std::string& what, bool shm, const at::Tensor& send, int right,
                    const at::Tensor& recv, int left);

  void ThrowIfAborted(const std::string& what) {
    if (world_->abort().triggered()) {
      throw CommError(what + " aborted: " + world_->abort().reason(), true);
    }
  }

  // The process group of `backends` for tensors on `tensor`'s device.
  static ProcessGroupBase& Backend(Backends& backends, const at::Tensor& tensor,
                                   const std::string& what) {
#if CONVEYOR_HAS_NCCL
    if (tensor.defined() && tensor.is_cuda()) {
      CONVEYOR_CHECK(backends.nccl) << what << ": a CUDA tensor needs C10dOptions::use_nccl";
      return *backends.nccl;
    }
#endif
    CONVEYOR_CHECK(!tensor.defined() || tensor.is_cpu())
        << what << ": this transport carries CPU tensors"
        << (CONVEYOR_HAS_NCCL ? " and CUDA tensors" : "") << ", not " << tensor.device();
    return *backends.gloo;
  }

  // Starts an operation on `backends` (the group's unless named); a backend refusing it is a
  // failure of this rank.
  C10dOp Start(std::string what, const at::Tensor& tensor, const Launch& launch,
               const std::shared_ptr<Backends>& backends) {
    ProcessGroupBase& pg = Backend(*backends, tensor, what);
    C10dOp op{{}, tensor, backends, std::move(what), false};
    op.pollable = &pg != backends->gloo.get();  // Gloo's point-to-point work has no future
    ThrowIfAborted(op.what);
    try {
      op.work = launch(pg);
    } catch (const std::exception& e) {
      world_->Raise(op.what, op.what + " failed: " + Brief(e));
    }
    return op;
  }

  std::shared_ptr<Work> Post(std::string what, const std::vector<at::Tensor>& tensors,
                             const Launch& launch) {
    return Post(std::move(what), tensors, launch, backends_);
  }
  std::shared_ptr<Work> Post(std::string what, const std::vector<at::Tensor>& tensors,
                             const Launch& launch, const std::shared_ptr<Backends>& backends) {
    return std::make_shared<C10dWork>(world_, Start(std::move(what), tensors[0], launch, backends));
  }

  // Runs a collective to completion.
  void Run(std::string what, const at::Tensor& tensor, const Launch& launch) {
    C10dOp op = Start(std::move(what), tensor, launch, backends_);
    op.pollable = true;  // collectives complete a future on every backend
    world_->Wait(op);
  }

  // Names a collective in messages: "rank 0: all-gather #3".
  std::string NextCollective(const char* op) {
    return ranks_.Self() + ": " + op + " #" + std::to_string(next_collective_++);
  }

  std::shared_ptr<C10dWorld> world_;
  GroupRanks ranks_;
  std::string prefix_;
  bool is_world_;
  std::uint64_t shm_space_;  // this group's bits of a shared-memory tag, or kNoShm
  std::shared_ptr<Backends> backends_;
  // The process groups that carry the ring messages of this group's reduce-scatters, and
  // nothing else (so these can never match the caller's Send and Recv, whatever the tags);
  // connected at the first reduce-scatter, where every member is (it is collective).
  std::shared_ptr<Backends> ring_;
  std::uint64_t next_group_ = 0;
  std::uint64_t next_collective_ = 0;  // every collective but barriers and new groups
};

void C10dTransport::AllReduceSum(std::vector<at::Tensor>& tensors) {
  // One flat buffer per (dtype, device), in order of first appearance: c10d's all-reduce
  // takes one tensor per device, not a list of different tensors.
  std::vector<std::vector<size_t>> buckets;
  std::map<std::pair<at::ScalarType, std::string>, size_t> bucket_of;
  for (size_t i = 0; i < tensors.size(); ++i) {
    auto key = std::make_pair(tensors[i].scalar_type(), tensors[i].device().str());
    auto [it, added] = bucket_of.emplace(key, buckets.size());
    if (added) buckets.emplace_back();
    buckets[it->second].push_back(i);
  }
  std::string what = NextCollective("all-reduce");
  for (const std::vector<size_t>& bucket : buckets) {
    // A lone contiguous tensor (the data-parallel reducer's flat bucket) is reduced in place:
    // no copy of it, in memory or time.
    const at::Tensor& first = tensors[bucket[0]];
    const bool in_place = bucket.size() == 1 && first.is_contiguous();
    std::vector<at::Tensor> flat;
    for (size_t i : bucket) flat.push_back(tensors[i].reshape({-1}));
    std::vector<at::Tensor> buffer = {in_place ? first.view({-1}) : at::cat(flat)};
    if (ShmReachesAll(buffer[0])) {
      ShmAllReduce(what, buffer[0]);
    } else {
      Run(what, buffer[0], [&](ProcessGroupBase& pg) { return pg.allreduce(buffer); });
    }
    if (in_place) continue;
    int64_t offset = 0;
    for (size_t i : bucket) {
      int64_t n = tensors[i].numel();
      tensors[i].copy_(buffer[0].narrow(0, offset, n).view(tensors[i].sizes()));
      offset += n;
    }
  }
}

at::Tensor C10dTransport::ReduceScatterSum(const at::Tensor& input,
                                           const std::vector<int64_t>& counts) {
  const ScatterParts parts(ranks_, input, counts);
  const std::string what = NextCollective("reduce-scatter");
  const at::Tensor flat = input.contiguous();
  if (world_size() == 1) return flat.clone();
  return RingReduceScatter(what, flat, parts);
}

at::Tensor C10dTransport::RingReduceScatter(const std::string& what, const at::Tensor& flat,
                                            const ScatterParts& parts) {
  const int n = world_size();
  const int me = rank();
  const bool shm = ShmReachesAll(flat);
  if (!shm && ring_ == nullptr) ring_ = Connect(*world_, prefix_ + "/ring", ranks_);
  // A ring: in step k of n - 1, every rank sends one partial sum to its right neighbour and
  // adds its own input to the one it receives from its left. Rank r starts with its input's
  // part r - 1; the part it holds after step k holds the inputs of k + 1 ranks, and after
  // step n - 1 it is part r, summed over all n. Each rank sends and receives n - 1 parts:
  // about (n - 1) / n of one input. Empty parts are not sent.
  const int right = (me + 1) % n;
  const int left = (me + n - 1) % n;
  auto held_after = [&](int step) { return ((me - step - 1) % n + n) % n; };
  at::Tensor carry = parts.Of(flat, held_after(0));
  for (int step = 1; step < n; ++step) {
    const int part = held_after(step);
    at::Tensor got = at::empty({parts.count(part)}, flat.options());
    const std::string at_step =
        what + " step " + std::to_string(step) + " of " + std::to_string(n - 1);
    RingExchange(at_step, shm, carry, right, got, left);
    got.add_(parts.Of(flat, part));
    carry = got;
  }
  return carry;
}

void C10dTransport::ShmAllReduce(const std::string& what, const at::Tensor& flat) {
  const int n = world_size();
  const int me = rank();
  if (n == 1) return;
  // A ring reduce-scatter of n near-equal parts, then a ring all-gather of the sums: each
  // rank sends and receives about 2 (n - 1) / n of the input.
  std::vector<int64_t> counts(n, flat.numel() / n);
  for (int r = 0; r < flat.numel() % n; ++r) ++counts[r];
  const ScatterParts parts(ranks_, flat, counts);
  parts.Of(flat, me).copy_(RingReduceScatter(what + " (reduce-scatter)", flat, parts));
  ShmRingAllGather(what + " (all-gather)", flat, parts);
}

void C10dTransport::ShmRingAllGather(const std::string& what, const at::Tensor& flat,
                                     const ScatterParts& parts) {
  const int n = world_size();
  const int me = rank();
  // Step k: send the part received last (first one's own), receive part me - k from the left.
  const int right = (me + 1) % n;
  const int left = (me + n - 1) % n;
  for (int step = 1; step < n; ++step) {
    const int part = ((me - step) % n + n) % n;
    at::Tensor got = parts.Of(flat, part);
    const std::string at_step =
        what + " step " + std::to_string(step) + " of " + std::to_string(n - 1);
    RingExchange(at_step, /*shm=*/true, parts.Of(flat, (part + 1) % n), right, got, left);
  }
}

void C10dTransport::RingExchange(const std::string& what, bool shm, const at::Tensor& send,
                                 int right, const at::Tensor& recv, int left) {
  // Shared memory under a tag no Send or Recv can use (bit 31 set); else Gloo process groups
  // of their own, whose tags cannot meet the caller's.
  const std::uint64_t tag = shm_space_ | (std::uint64_t{1} << 31);
  std::shared_ptr<Work> in, out;
  const std::string from = what + ": recv from rank " + std::to_string(ranks_.world_rank(left));
  const std::string to = what + ": send to rank " + std::to_string(ranks_.world_rank(right));
  if (recv.numel() > 0) {
    if (shm) {
      in = ShmRecv(recv, left, tag, from);
    } else {
      std::vector<at::Tensor> buffer = {recv};
      in = Post(
          from, buffer, [&](ProcessGroupBase& pg) { return pg.recv(buffer, left, 0); }, ring_);
    }
  }
  if (send.numel() > 0) {
    if (shm) {
      out = ShmSend(send, right, tag, to);
    } else {
      std::vector<at::Tensor> buffer = {send.contiguous()};
      out = Post(
          to, buffer, [&](ProcessGroupBase& pg) { return pg.send(buffer, right, 0); }, ring_);
    }
  }
  if (in != nullptr) in->Wait();
  if (out != nullptr) out->Wait();
}

std::vector<at::Tensor> C10dTransport::AllGather(const at::Tensor& local) {
  std::string what = NextCollective("all-gather");
  CONVEYOR_CHECK(local.defined()) << what << ": the tensor is undefined";
  // Every rank's tensor lands in one buffer, row r = rank r's; the rows are the results.
  std::vector<int64_t> sizes = {world_size()};
  sizes.insert(sizes.end(), local.sizes().begin(), local.sizes().end());
  const at::Tensor gathered = at::empty(sizes, local.options());
  if (world_size() > 1 && ShmReachesAll(gathered)) {  // a ring through shared memory
    gathered[rank()].copy_(local);
    const at::Tensor flat = gathered.view({-1});
    ShmRingAllGather(what, flat,
                     ScatterParts(ranks_, flat, std::vector<int64_t>(world_size(), local.numel())));
    return gathered.unbind(0);
  }
  std::vector<at::Tensor> input = {local.contiguous()};
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int r = 0; r < world_size(); ++r) outputs[0].push_back(gathered[r]);
  Run(what, gathered, [&](ProcessGroupBase& pg) { return pg.allgather(outputs, input); });
  return gathered.unbind(0);
}

at::Tensor C10dTransport::AllToAll(const at::Tensor& input, const std::vector<int64_t>& send_counts,
                                   const std::vector<int64_t>& recv_counts) {
  const ScatterParts from = ScatterParts::AllToAllReceived(ranks_, input, send_counts, recv_counts);
  std::string what = NextCollective("all-to-all");
  std::vector<int64_t> sizes = input.sizes().vec();
  sizes[0] = from.total();
  at::Tensor output = at::empty(sizes, input.options().memory_format(at::MemoryFormat::Contiguous));
  at::Tensor source = input.contiguous();
  std::vector<int64_t> sent = send_counts, received = recv_counts;  // c10d takes them mutable
  Run(what, output,
      [&](ProcessGroupBase& pg) { return pg.alltoall_base(output, source, received, sent); });
  return output;
}

void C10dTransport::Broadcast(at::Tensor& tensor, int root) {
  ranks_.CheckRoot("broadcast", root);
  std::string what =
      NextCollective("broadcast") + " from rank " + std::to_string(ranks_.world_rank(root));
  CONVEYOR_CHECK(tensor.defined()) << what << ": the tensor is undefined";
  std::vector<at::Tensor> buffer = {tensor.contiguous()};  // `tensor` itself when contiguous
  c10d::BroadcastOptions options;
  options.rootRank = root;
  Run(what, buffer[0], [&](ProcessGroupBase& pg) { return pg.broadcast(buffer, options); });
  if (!buffer[0].is_same(tensor)) tensor.copy_(buffer[0]);
}

}  // namespace

std::unique_ptr<Transport> ConnectC10d(const RendezvousInfo& info, const C10dOptions& options) {
  CONVEYOR_CHECK(!options.use_nccl || CONVEYOR_HAS_NCCL)
      << "rank " << info.rank << ": C10dOptions::use_nccl, but this libtorch has no NCCL";
  CONVEYOR_CHECK(options.failure_poll_interval.count() > 0)
      << "failure_poll_interval must be positive, got " << options.failure_poll_interval.count()
      << " ms";
  auto world = std::make_shared<C10dWorld>(info, options);
  return std::make_unique<C10dTransport>(std::move(world),
                                         GroupRanks::World(info.world_size, info.rank), "pg",
                                         /*is_world=*/true, /*shm_space=*/0);
}

}  // namespace conveyor
