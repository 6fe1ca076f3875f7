// Real processes over Gloo on 127.0.0.1: each C10dTransportTest case launches this test
// binary as N ranks (LaunchWorker, a free port) running one worker, and checks that every
// rank that should finished it (worker_testing.h). A worker that fails an expectation exits
// non-zero, and the launcher reports it. The ranks share this host, so their point-to-point
// traffic goes through shared memory unless a test turns it off (CONVEYOR_SHM=0 in the
// environment also does, for every test).
#include "conveyor/comm/c10d_transport.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <string_view>

#include "conveyor/comm/all_to_all_testing.h"
#include "conveyor/common/env.h"
#include "conveyor/common/remove_tree.h"
#include "conveyor/launch/launcher.h"
#include "conveyor/launch/worker_testing.h"

namespace conveyor {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// Generous: failure propagation, not this timeout, is what must stop the ranks below.
constexpr std::chrono::seconds kOpTimeout(60);

// Ranks whose world rank is listed in this variable ("0,2") connect with CONVEYOR_SHM=0.
constexpr char kGlooRanksVariable[] = "CONVEYOR_C10D_TEST_GLOO_RANKS";

// A folder where each rank, once connected, lists the shared-memory segments it maps (file
// RANK): its run's own and its local peers', whose names are random (shm_channel.cc).
constexpr char kSegmentsVariable[] = "CONVEYOR_C10D_TEST_SEGMENTS";

// In a worker, where kSegmentsVariable is set: writes the names ("conveyor-RUN-RANK") of the
// /dev/shm segments this process maps, unlinked already or not, to FOLDER/`rank`.
void RecordMappedSegments(int rank) {
  const char* folder = std::getenv(kSegmentsVariable);
  if (folder == nullptr) return;
  std::ifstream maps("/proc/self/maps");
  std::ofstream out(std::string(folder) + "/" + std::to_string(rank));
  constexpr std::string_view kShm = "/dev/shm/";
  for (std::string line; std::getline(maps, line);) {
    const size_t at = line.find("/dev/shm/conveyor-");
    if (at == std::string::npos) continue;
    const std::string name = line.substr(at + kShm.size());
    out << name.substr(0, name.find(' ')) << "\n";  // less " (deleted)"
  }
}

// Runs `worker` as `nproc` ranks, bounded by a deadline.
WorkerRun LaunchWorkers(int nproc, const std::string& worker, bool stop_all_on_failure,
                        const Environment& env = {}) {
  LaunchOptions options;
  options.extra_env = env;
  options.deadline = std::chrono::seconds(150);
  options.grace = std::chrono::seconds(2);
  options.stop_all_on_failure = stop_all_on_failure;
  options.out = &std::cerr;
  return LaunchWorker(nproc, worker, options);
}

std::unique_ptr<Transport> ConnectWorker() {
  RendezvousInfo info = RendezvousFromEnvironment();
  if (const char* gloo = std::getenv(kGlooRanksVariable)) {
    std::string ranks = std::string(",") + gloo + ",";
    if (ranks.find("," + std::to_string(info.rank) + ",") != std::string::npos) {
      setenv("CONVEYOR_SHM", "0", 1);
    }
  }
  C10dOptions options;
  options.transport.timeout = kOpTimeout;
  options.failure_poll_interval = std::chrono::milliseconds(50);
  std::unique_ptr<Transport> t = ConnectC10d(info, options);
  RecordMappedSegments(info.rank);
  return t;
}

// The CommError `work.Wait()` throws ("no error" when it returns).
std::string WaitError(Work& work) {
  try {
    work.Wait();
  } catch (const CommError& e) {
    std::cout << "Wait threw: " << e.what() << std::endl;
    return e.what();
  }
  return "no error";
}

// A barrier after which rank `failing` returns only once every other rank is past it: a rank
// can leave a barrier while a peer still waits on its last message, and a failure right after
// would abort that wait rather than the one a test is about. The others tell `failing` with a
// send nobody waits on (a wait could be aborted too; a dropped send still goes out).
void MeetBeforeFailure(Transport& t, int failing) {
  constexpr std::uint32_t kPastTheBarrier = 99;
  t.Barrier();
  if (t.rank() != failing) {
    t.Send(at::ones({1}), failing, kPastTheBarrier);
    return;
  }
  for (int peer = 0; peer < t.world_size(); ++peer) {
    if (peer != failing) t.Recv(at::zeros({1}), peer, kPastTheBarrier)->Wait();
  }
}

// The shared-memory segments the ranks of one launch map, as they record them: this run's
// own. Not every new conveyor-* entry in /dev/shm: other tests running beside this one
// (ctest -j) make theirs, which this run must not count as its leaks.
class RunSegments {
 public:
  RunSegments() : folder_(::testing::TempDir() + "c10d-segments-XXXXXX") {
    if (mkdtemp(folder_.data()) == nullptr) ADD_FAILURE() << "mkdtemp: " << std::strerror(errno);
  }
  ~RunSegments() {
    std::error_code ignored;
    RemoveTree(folder_, ignored);
  }

  // For the ranks' environment.
  Environment env() const { return {{kSegmentsVariable, folder_}}; }

  // The segments the ranks recorded.
  std::set<std::string> Names() const {
    std::set<std::string> names;
    for (const auto& file : std::filesystem::directory_iterator(folder_)) {
      std::ifstream in(file.path());
      for (std::string name; std::getline(in, name);) names.insert(name);
    }
    return names;
  }

  // Those of them still in /dev/shm once every rank is gone (leaks), space-separated.
  std::string Left() const {
    std::string left;
    for (const std::string& name : Names()) {
      if (std::filesystem::exists("/dev/shm/" + name)) left += name + " ";
    }
    return left;
  }

 private:
  std::string folder_;
};

TEST(C10dTransportTest, PointToPointCollectivesAndSubgroups) {
  // Shared memory between all four, between none, and between 0 and 1 only.
  for (const char* gloo_ranks : {"", "0,1,2,3", "2,3"}) {
    WorkerRun run = LaunchWorkers(4, "Exchange", true, {{kGlooRanksVariable, gloo_ranks}});
    EXPECT_TRUE(run.launch.ok()) << "Gloo for ranks [" << gloo_ranks
                                 << "]: " << run.launch.Report();
    EXPECT_THAT(run.finished, ElementsAre(0, 1, 2, 3)) << "Gloo for ranks [" << gloo_ranks << "]";
  }
}

TEST(C10dTransportTest, SharedMemoryPointToPoint) {
  const RunSegments segments;
  WorkerRun run = LaunchWorkers(3, "SharedMemory", true, segments.env());
  EXPECT_TRUE(run.launch.ok()) << run.launch.Report();
  EXPECT_THAT(run.finished, ElementsAre(0, 1, 2));
  if (EnvFlag("CONVEYOR_SHM", true)) {
    EXPECT_EQ(segments.Names().size(), 3u) << "one a rank";
  }
  EXPECT_EQ(segments.Left(), "");
}

CONVEYOR_WORKER(SharedMemory) {
  std::unique_ptr<Transport> t = ConnectWorker();
  const int me = t->rank();
  const bool gloo = !EnvFlag("CONVEYOR_SHM", true);  // the large part still runs
  // A send that fits in its ring is complete at once, before the peer posts anything.
  if (me == 0) {
    auto send = t->Send(at::full({8192}, 3.0), 1, 1);  // 32 KiB
    if (!gloo) {
      EXPECT_TRUE(send->IsCompleted());
    }
  }
  t->Barrier();
  if (me == 1) {
    at::Tensor got = at::zeros({8192});
    t->Recv(got, 0, 1)->Wait();
    EXPECT_EQ(got[8191].item<float>(), 3.0f);
  }
  // Messages several times larger than a ring (4 MiB), both ways at once between 0 and 1,
  // and one from 2 whose handle is dropped and whose receive is posted after a barrier.
  const int64_t big = 5 << 20;  // floats: 20 MiB
  if (me < 2) {
    at::Tensor mine = at::arange(big, at::kFloat) + me;
    at::Tensor got = at::empty({big});
    auto recv = t->Recv(got, 1 - me, 2);
    auto send = t->Send(mine, 1 - me, 2);
    recv->Wait();
    send->Wait();
    EXPECT_TRUE(got.equal(at::arange(big, at::kFloat) + (1 - me)));
  } else {
    t->Send(at::full({big}, 2.5), 0, 3);  // dropped: still delivered
  }
  t->Barrier();
  if (me == 0) {
    at::Tensor got = at::zeros({big});
    t->Recv(got, 2, 3)->Wait();
    EXPECT_EQ(got.sum().item<double>(), 2.5 * big);
  }
  // A sub-group's messages go through shared memory too (a pipeline in a dp x pp mesh), and
  // never match the world's or another group's between the same ranks with the same tag,
  // even when they arrive before their receives are posted.
  std::unique_ptr<Transport> pair = t->NewGroup({1, 0});
  std::unique_ptr<Transport> other = t->NewGroup({0, 1});
  std::vector<std::shared_ptr<Work>> sent;
  if (me == 0) {
    sent.push_back(t->Send(at::full({4}, 1.0), 1, 5));
    sent.push_back(pair->Send(at::full({4}, 2.0), 0, 5));  // pair's rank 0 is world rank 1
    sent.push_back(other->Send(at::full({4}, 3.0), 1, 5));
    if (!gloo) {
      EXPECT_TRUE(sent[1]->IsCompleted());
      EXPECT_TRUE(sent[2]->IsCompleted());
    }
  }
  t->Barrier();
  if (me == 1) {
    at::Tensor a = at::zeros({4}), b = at::zeros({4}), c = at::zeros({4});
    other->Recv(c, 0, 5)->Wait();
    pair->Recv(b, 1, 5)->Wait();
    t->Recv(a, 0, 5)->Wait();
    EXPECT_EQ(a[3].item<float>(), 1.0f);
    EXPECT_EQ(b[3].item<float>(), 2.0f);
    EXPECT_EQ(c[3].item<float>(), 3.0f);
  }
  for (const std::shared_ptr<Work>& send : sent) send->Wait();
  // All-reduces through shared memory (a ring over the three ranks): fewer elements than
  // ranks (an empty part), and more bytes than a ring holds; every rank gets the same sums.
  std::vector<at::Tensor> sums = {at::full({2}, me + 1.0), at::full({big + 1}, me + 0.25),
                                  at::full({3}, int64_t{me}, at::kLong)};
  t->AllReduceSum(sums);
  EXPECT_TRUE(sums[0].equal(at::full({2}, 6.0)));
  EXPECT_TRUE(sums[1].equal(at::full({big + 1}, 3.75)));
  EXPECT_TRUE(sums[2].equal(at::full({3}, int64_t{3}, at::kLong)));
  if (me < 2) {
    std::vector<at::Tensor> in_pair = {at::arange(7, at::kFloat) * (me + 1)};
    pair->AllReduceSum(in_pair);
    EXPECT_TRUE(in_pair[0].equal(at::arange(7, at::kFloat) * 3));
  }
  std::vector<at::Tensor> one = {at::ones({1})};
  t->AllReduceSum(one);
  EXPECT_EQ(one[0].item<float>(), 3.0f);
}

CONVEYOR_WORKER(Exchange) {
  std::unique_ptr<Transport> t = ConnectWorker();
  const int n = t->world_size();
  const int left = (t->rank() + n - 1) % n;
  const int right = (t->rank() + 1) % n;
  // Receives first, sends in reverse tag order, one send handle dropped.
  std::vector<at::Tensor> got;
  std::vector<std::shared_ptr<Work>> recvs;
  for (int tag = 0; tag < 4; ++tag) {
    got.push_back(at::zeros({3}));
    recvs.push_back(t->Recv(got.back(), left, tag));
  }
  std::vector<std::shared_ptr<Work>> sends;
  for (int tag = 3; tag >= 0; --tag) {
    auto send = t->Send(at::full({3}, 100.0 * t->rank() + tag), right, tag);
    if (tag != 2) sends.push_back(send);
  }
  for (int tag = 0; tag < 4; ++tag) {
    recvs[tag]->Wait();
    EXPECT_EQ(got[tag][2].item<float>(), 100.0 * left + tag) << "tag " << tag;
  }
  for (auto& send : sends) send->Wait();

  std::vector<at::Tensor> sums = {at::full({2, 2}, t->rank() + 1.0),
                                  at::full({3}, t->rank(), at::kLong), at::ones({1})};
  t->AllReduceSum(sums);
  EXPECT_EQ(sums[0][1][1].item<float>(), 10.0);
  EXPECT_EQ(sums[1][2].item<int64_t>(), 6);
  EXPECT_EQ(sums[2].item<float>(), 4.0);

  std::unique_ptr<Transport> ends = t->NewGroup({n - 1, 0});  // e.g. tied embeddings
  std::unique_ptr<Transport> middle = t->NewGroup({1, 2});
  if (t->rank() == 0 || t->rank() == n - 1) {
    ASSERT_NE(ends, nullptr);
    EXPECT_EQ(middle, nullptr);
    EXPECT_EQ(ends->rank(), t->rank() == 0 ? 1 : 0);
    std::vector<at::Tensor> x = {at::full({1}, t->rank() * 1.0)};
    ends->AllReduceSum(x);
    EXPECT_EQ(x[0].item<float>(), n - 1.0);
    at::Tensor y = at::zeros({1});
    auto recv = ends->Recv(y, 1 - ends->rank(), 7);
    ends->Send(at::full({1}, t->rank() + 0.5), 1 - ends->rank(), 7)->Wait();
    recv->Wait();
    EXPECT_EQ(y.item<float>(), (n - 1 - t->rank()) + 0.5);
  } else {
    EXPECT_EQ(ends, nullptr);
    ASSERT_NE(middle, nullptr);
    middle->Barrier();
  }
  t->Barrier();
}

TEST(C10dTransportTest, AllGatherAndBroadcastInTheWorldAndSubgroups) {
  WorkerRun run = LaunchWorkers(4, "GatherAndBroadcast", true);
  EXPECT_TRUE(run.launch.ok()) << run.launch.Report();
  EXPECT_THAT(run.finished, ElementsAre(0, 1, 2, 3));
}

CONVEYOR_WORKER(GatherAndBroadcast) {
  std::unique_ptr<Transport> t = ConnectWorker();
  const int n = t->world_size();
  const int me = t->rank();
  // Non-contiguous operands, two dtypes, a 0-dimensional one; element r is rank r's.
  auto operand = [](int rank) { return (at::arange(6, at::kLong).view({2, 3}) + 10 * rank).t(); };
  std::vector<at::Tensor> all = t->AllGather(operand(me));
  ASSERT_EQ(all.size(), static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(all[r].is_contiguous());
    EXPECT_TRUE(all[r].equal(operand(r)))
        << "rank " << me << " got " << all[r] << " for rank " << r;
  }
  std::vector<at::Tensor> scalars = t->AllGather(at::full({}, me + 0.5, at::kDouble));
  ASSERT_EQ(scalars.size(), static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) EXPECT_EQ(scalars[r].item<double>(), r + 0.5);

  at::Tensor x = at::full({3, 2}, me * 1.0).t();
  t->Broadcast(x, 2);
  EXPECT_TRUE(x.equal(at::full({2, 3}, 2.0))) << "rank " << me << ": " << x;
  EXPECT_THROW(t->Broadcast(x, n), UserError);  // refused before any traffic

  // Sub-groups whose ranks are not in world order; roots are group ranks.
  std::unique_ptr<Transport> odd = t->NewGroup({3, 1});
  std::unique_ptr<Transport> even = t->NewGroup({0, 2});
  Transport* group = me % 2 == 1 ? odd.get() : even.get();
  ASSERT_NE(group, nullptr);
  std::vector<at::Tensor> members = group->AllGather(at::full({2}, me * 1.0));
  ASSERT_EQ(members.size(), 2u);
  EXPECT_EQ(members[0][1].item<float>(), me % 2 == 1 ? 3.0 : 0.0);
  EXPECT_EQ(members[1][0].item<float>(), me % 2 == 1 ? 1.0 : 2.0);
  at::Tensor y = at::full({1}, me + 1, at::kInt);
  group->Broadcast(y, 1);  // world rank 1 in the odd group, 2 in the even one
  EXPECT_EQ(y.item<int>(), me % 2 == 1 ? 2 : 3);
  t->Barrier();
}

TEST(C10dTransportTest, AllToAllInTheWorldAndASubgroup) {
  WorkerRun run = LaunchWorkers(4, "AllToAll", true);
  EXPECT_TRUE(run.launch.ok()) << run.launch.Report();
  EXPECT_THAT(run.finished, ElementsAre(0, 1, 2, 3));
}

CONVEYOR_WORKER(AllToAll) {
  std::unique_ptr<Transport> t = ConnectWorker();
  ExpectAllToAllDelivers(*t);
  std::unique_ptr<Transport> group = t->NewGroup({3, 0, 2});
  if (group != nullptr) ExpectAllToAllDelivers(*group);
  t->Barrier();
}

TEST(C10dTransportTest, ReduceScatterInTheWorldAndSubgroupsOfOneToFourRanks) {
  // Shared memory between all four, and none.
  for (const char* gloo_ranks : {"", "0,1,2,3"}) {
    WorkerRun run = LaunchWorkers(4, "ReduceScatter", true, {{kGlooRanksVariable, gloo_ranks}});
    EXPECT_TRUE(run.launch.ok()) << "Gloo for ranks [" << gloo_ranks
                                 << "]: " << run.launch.Report();
    EXPECT_THAT(run.finished, ElementsAre(0, 1, 2, 3)) << "Gloo for ranks [" << gloo_ranks << "]";
  }
}

// Checks a reduce-scatter of `group` (member world rank `me`) against the sum of the inputs
// every member makes, for even, uneven and empty parts, while a point-to-point message of
// the group's with tag 0 is in flight around it.
void CheckReduceScatter(Transport& group, int me) {
  const int n = group.world_size();
  const int right = (group.rank() + 1) % n;
  const int left = (group.rank() + n - 1) % n;
  // Rank r's input (non-contiguous), from its world rank.
  auto input = [](int world_rank, int64_t numel) {
    return (at::arange(2 * numel, at::kFloat) * (world_rank + 1) + 100.0 * world_rank)
        .slice(0, 0, 2 * numel, 2);
  };
  std::vector<int> members(n);
  for (int r = 0; r < n; ++r) {
    members[r] = static_cast<int>(group.AllGather(at::full({1}, me, at::kInt))[r].item<int>());
  }
  std::vector<std::vector<int64_t>> cases = {std::vector<int64_t>(n, 1000), {}, {}};
  for (int r = 0; r < n; ++r) {
    cases[1].push_back(7 * r + 1);
    cases[2].push_back(r % 2 == 0 ? 0 : 3);
  }
  for (const std::vector<int64_t>& counts : cases) {
    int64_t numel = 0;
    for (int64_t c : counts) numel += c;
    at::Tensor sum = at::zeros({numel});
    for (int m : members) sum += input(m, numel);
    at::Tensor message = at::zeros({2});
    std::shared_ptr<Work> recv = n > 1 ? group.Recv(message, left, 0) : nullptr;
    const at::Tensor mine = input(me, numel);
    const at::Tensor before = mine.clone();
    const at::Tensor part = group.ReduceScatterSum(mine, counts);
    int64_t begin = 0;
    for (int r = 0; r < group.rank(); ++r) begin += counts[r];
    EXPECT_TRUE(part.equal(sum.narrow(0, begin, counts[group.rank()])))
        << "rank " << me << " in a group of " << n << ", counts " << at::IntArrayRef(counts);
    EXPECT_TRUE(mine.equal(before)) << "the input was modified";
    if (n > 1) {
      group.Send(at::full({2}, me + 0.5), right, 0)->Wait();
      recv->Wait();
      EXPECT_EQ(message[1].item<float>(), members[left] + 0.5) << "rank " << me;
    }
  }
}

CONVEYOR_WORKER(ReduceScatter) {
  std::unique_ptr<Transport> t = ConnectWorker();
  const int me = t->rank();
  CheckReduceScatter(*t, me);
  std::unique_ptr<Transport> three = t->NewGroup({3, 1, 0});
  std::unique_ptr<Transport> pair = t->NewGroup({2, 1});
  std::vector<std::unique_ptr<Transport>> singles;
  for (int r = 0; r < t->world_size(); ++r) singles.push_back(t->NewGroup({r}));
  if (three != nullptr) CheckReduceScatter(*three, me);
  if (pair != nullptr) CheckReduceScatter(*pair, me);
  CheckReduceScatter(*singles[me], me);
  EXPECT_THROW(t->ReduceScatterSum(at::zeros({3}), {1, 1, 1}), UserError);  // before traffic
  t->Barrier();
}

TEST(C10dTransportTest, ReduceScatterIsAbortedByAFailedRankNamingIt) {
  WorkerRun run = LaunchWorkers(3, "ReduceScatterFailure", true);
  EXPECT_TRUE(run.launch.ok()) << run.launch.Report();
  EXPECT_THAT(run.finished, ElementsAre(0, 1, 2));
}

CONVEYOR_WORKER(ReduceScatterFailure) {
  std::unique_ptr<Transport> t = ConnectWorker();
  EXPECT_EQ(t->ReduceScatterSum(at::ones({3}), {1, 1, 1}).item<float>(), 3.0f);
  MeetBeforeFailure(*t, 1);
  if (t->rank() == 1) {
    t->ReportFailure("loss is NaN");
    return;
  }
  try {
    t->ReduceScatterSum(at::ones({3}), {1, 1, 1});
    ADD_FAILURE() << "a reduce-scatter passed without rank 1";
  } catch (const CommError& e) {
    EXPECT_THAT(e.what(), HasSubstr("rank " + std::to_string(t->rank()) + ": reduce-scatter #1 "));
    EXPECT_THAT(e.what(), HasSubstr("aborted: rank 1 failed: loss is NaN"));
  }
}

TEST(C10dTransportTest, KilledRankAbortsEveryPendingWait) {
  const RunSegments segments;
  WorkerRun run = LaunchWorkers(4, "KilledRank", /*stop_all_on_failure=*/false, segments.env());
  EXPECT_THAT(run.finished, ElementsAre(0, 2, 3));
  const LaunchResult& result = run.launch;
  if (EnvFlag("CONVEYOR_SHM", true)) {
    EXPECT_EQ(segments.Names().size(), 4u) << "one a rank";
  }
  EXPECT_EQ(segments.Left(), "") << "a killed rank leaves nothing in /dev/shm";
  EXPECT_EQ(result.failed_rank, 1) << result.Report();
  ASSERT_EQ(result.ranks.size(), 4u);
  EXPECT_EQ(result.ranks[1].signal, SIGKILL);
  for (int r : {0, 2, 3}) EXPECT_TRUE(result.ranks[r].ok()) << result.ranks[r].Describe();
  EXPECT_FALSE(result.deadline_exceeded);
}

CONVEYOR_WORKER(KilledRank) {
  std::unique_ptr<Transport> t = ConnectWorker();
  const int n = t->world_size();
  // Everyone waits on its left neighbour, which never sends: rank 2 waits on rank 1.
  auto recv = t->Recv(at::zeros({1}), (t->rank() + n - 1) % n, 1);
  MeetBeforeFailure(*t, 1);
  if (t->rank() == 1) raise(SIGKILL);
  std::string error = WaitError(*recv);
  EXPECT_THAT(error, HasSubstr("rank " + std::to_string(t->rank()) + ": recv from rank"));
  EXPECT_THAT(error, Not(HasSubstr("timed out")));
  EXPECT_THAT(error, HasSubstr(t->rank() == 2 ? "failed" : "aborted: rank 2"));
}

TEST(C10dTransportTest, ReportedFailureStopsOtherRanksNamingTheRank) {
  WorkerRun run = LaunchWorkers(3, "ReportedFailure", true);
  EXPECT_TRUE(run.launch.ok()) << run.launch.Report();
  EXPECT_THAT(run.finished, ElementsAre(0, 1, 2));
}

CONVEYOR_WORKER(ReportedFailure) {
  std::unique_ptr<Transport> t = ConnectWorker();
  auto recv = t->rank() == 1 ? nullptr : t->Recv(at::zeros({1}), 1, 3);
  MeetBeforeFailure(*t, 1);
  if (t->rank() == 1) {
    t->ReportFailure("loss is NaN at step 7");
    EXPECT_THROW(t->Barrier(), CommError);
    return;
  }
  EXPECT_THAT(WaitError(*recv), HasSubstr("aborted: rank 1 failed: loss is NaN at step 7"));
  try {
    t->Barrier();
    ADD_FAILURE() << "a barrier passed after a failure";
  } catch (const CommError& e) {
    EXPECT_THAT(e.what(), HasSubstr("barrier aborted: rank 1 failed"));
  }
}

TEST(C10dTransportTest, ReceiveWithoutSenderTimesOutNamingPeerAndTag) {
  WorkerRun run = LaunchWorkers(2, "Timeout", true);
  EXPECT_TRUE(run.launch.ok()) << run.launch.Report();
  EXPECT_THAT(run.finished, ElementsAre(0, 1));
}

CONVEYOR_WORKER(Timeout) {
  // Rank 1 times out long before rank 0 would, and rank 0 learns of it as a failure.
  // 5 s, not less: the timeout also bounds connecting the Gloo group, slow on a busy machine.
  RendezvousInfo info = RendezvousFromEnvironment();
  C10dOptions options;
  options.transport.timeout = std::chrono::milliseconds(info.rank == 0 ? 60000 : 5000);
  std::unique_ptr<Transport> t = ConnectC10d(info, options);
  if (t->rank() == 0) {
    std::string error = WaitError(*t->Recv(at::zeros({1}), 1, 5));
    EXPECT_THAT(error, HasSubstr("aborted: rank 1: recv from rank 0 (tag 42)"));
    return;
  }
  std::string error = WaitError(*t->Recv(at::zeros({1}), 0, 42));
  EXPECT_THAT(error, HasSubstr("rank 1: recv from rank 0 (tag 42)"));
  EXPECT_THAT(error, HasSubstr("imed out"));
}

TEST(C10dTransportTest, CollectiveTimesOutAndAbortsTheOthersWaits) {
  WorkerRun run = LaunchWorkers(3, "CollectiveTimeout", true);
  EXPECT_TRUE(run.launch.ok()) << run.launch.Report();
  EXPECT_THAT(run.finished, ElementsAre(0, 1, 2));
}

CONVEYOR_WORKER(CollectiveTimeout) {
  // Rank 1 alone enters a world all-gather and times out long before the others would; rank 0
  // waits in a sub-group's all-gather for rank 1, rank 2 on a receive from it: both are
  // aborted with rank 1's failure.
  // 5 s, not less: the timeout also bounds connecting the Gloo groups, slow on a busy machine.
  RendezvousInfo info = RendezvousFromEnvironment();
  C10dOptions options;
  options.transport.timeout = std::chrono::milliseconds(info.rank == 1 ? 5000 : 60000);
  options.failure_poll_interval = std::chrono::milliseconds(50);
  std::unique_ptr<Transport> t = ConnectC10d(info, options);
  std::unique_ptr<Transport> pair = t->NewGroup({0, 1});
  std::string error = "no error";
  try {
    if (t->rank() == 0) pair->AllGather(at::zeros({2}));
    if (t->rank() == 1) t->AllGather(at::zeros({2}));
    if (t->rank() == 2) t->Recv(at::zeros({1}), 1, 5)->Wait();
  } catch (const CommError& e) {
    error = e.what();
  }
  std::cout << error << std::endl;
  if (t->rank() == 1) {
    EXPECT_THAT(error, HasSubstr("rank 1: all-gather #0 "));
    EXPECT_THAT(error, HasSubstr("imed out"));
    EXPECT_THAT(error, Not(HasSubstr("aborted")));
  } else {
    // Rank 0's all-gather goes around a ring through shared memory: its step is named too.
    const std::string what = t->rank() == 0 ? "rank 0 (rank 0 of group [0, 1]): all-gather #0"
                                            : "rank 2: recv from rank 1 (tag 5)";
    EXPECT_THAT(error, HasSubstr(what));
    EXPECT_THAT(error, HasSubstr(" aborted: rank 1: all-gather #0 "));
  }
}

}  // namespace
}  // namespace conveyor
