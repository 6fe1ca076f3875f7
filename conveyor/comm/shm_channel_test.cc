// ShmChannel between threads of this process (each thread plays a rank, with its own abort
// signal; the segments and futexes work the same between threads as between processes). A
// peer process that exits is covered by c10d_transport_test.cc.
#include "conveyor/comm/shm_channel.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "conveyor/comm/shm_segment.h"

namespace conveyor {
namespace {

using Status = ShmChannel::Status;
using std::chrono::milliseconds;

constexpr milliseconds kTimeout(20000);

class MemoryStore : public ShmChannel::Store {
 public:
  // Runs before a key is set (for the tests that interfere with the setup).
  std::function<void(const std::string& key, const std::string& value)> on_set;

  void Set(const std::string& key, const std::string& value) override {
    if (on_set) on_set(key, value);
    std::lock_guard<std::mutex> lock(mutex_);
    values_[key] = value;
    cv_.notify_all();
  }
  std::string Get(const std::string& key) override {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!cv_.wait_for(lock, kTimeout, [&] { return values_.count(key) != 0; })) {
      throw std::runtime_error("store: no key " + key);
    }
    return values_[key];
  }
  std::int64_t Add(const std::string& key, std::int64_t delta) override {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string& value = values_[key];
    std::int64_t sum = (value.empty() ? 0 : std::stoll(value)) + delta;
    value = std::to_string(sum);
    cv_.notify_all();
    return sum;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::string, std::string> values_;
};

struct World {
  MemoryStore store;
  std::vector<std::shared_ptr<AbortSignal>> aborts;
  std::vector<std::shared_ptr<ShmChannel>> channels;
  std::vector<std::string> why;
};

// Connects one channel per entry of `hosts` (rank = index), each on its own thread.
std::unique_ptr<World> Connect(const std::vector<std::string>& hosts,
                               const ShmChannelOptions& options = {},
                               std::unique_ptr<World> world = std::make_unique<World>()) {
  const int n = static_cast<int>(hosts.size());
  world->channels.resize(n);
  world->why.resize(n);
  for (int r = 0; r < n; ++r) world->aborts.push_back(AbortSignal::Create());
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      world->channels[r] = ShmChannel::Connect(r, n, hosts[r], world->store, world->aborts[r],
                                               options, &world->why[r]);
    });
  }
  for (auto& thread : threads) thread.join();
  return world;
}

std::unique_ptr<World> ConnectPair(const ShmChannelOptions& options = {}) {
  std::string host = ShmSegment::HostIdentity();
  return Connect({host, host}, options);
}

// Runs one function per rank on its own thread.
void RunRanks(const std::vector<std::function<void()>>& ranks) {
  std::vector<std::thread> threads;
  for (const auto& rank : ranks) threads.emplace_back(rank);
  for (auto& thread : threads) thread.join();
}

std::vector<std::uint8_t> Pattern(std::size_t n, unsigned seed) {
  std::vector<std::uint8_t> bytes(n);
  for (std::size_t i = 0; i < n; ++i) bytes[i] = static_cast<std::uint8_t>(i * 131 + seed * 7);
  return bytes;
}

std::shared_ptr<ShmChannel::Op> SendBytes(ShmChannel& channel, const std::vector<std::uint8_t>& b,
                                          int dst, std::uint32_t tag) {
  return channel.Send(b.data(), b.size(), dst, tag, nullptr);
}

void ExpectDone(ShmChannel& channel, ShmChannel::Op& op) {
  ShmChannel::Outcome outcome = channel.Wait(op, kTimeout);
  EXPECT_EQ(outcome.status, Status::kDone) << outcome.detail;
}

TEST(ShmChannelTest, ReachesOnlyRanksOnTheSameHost) {
  std::string host = ShmSegment::HostIdentity();
  auto world = Connect({host, host, host + "-elsewhere", ""});
  ASSERT_NE(world->channels[0], nullptr);
  ASSERT_NE(world->channels[1], nullptr);
  EXPECT_TRUE(world->channels[0]->Reaches(1));
  EXPECT_FALSE(world->channels[0]->Reaches(2));
  EXPECT_FALSE(world->channels[0]->Reaches(3));
  EXPECT_EQ(world->channels[2], nullptr);  // alone on its host
  EXPECT_EQ(world->channels[3], nullptr);  // opted out
  EXPECT_TRUE(world->why[0].empty());
}

TEST(ShmChannelTest, ASetupFailureOnOneRankTurnsItOffOnEvery) {
  // Rank 1's segment name is taken before it can create it.
  auto world = std::make_unique<World>();
  std::string planted;
  world->store.on_set = [&](const std::string& key, const std::string& value) {
    if (key != "conveyor/shm/run") return;
    planted = "/conveyor-" + value + "-1";
    int fd = shm_open(planted.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    ASSERT_GE(fd, 0);
    close(fd);
  };
  std::string host = ShmSegment::HostIdentity();
  world = Connect({host, host, host}, {}, std::move(world));
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(world->channels[r], nullptr) << "rank " << r;
    EXPECT_NE(world->why[r].find(planted + ": File exists"), std::string::npos) << world->why[r];
  }
  EXPECT_EQ(shm_unlink(planted.c_str()), 0) << "rank 1 must not unlink what it did not make";
}

TEST(ShmChannelTest, NothingIsLeftInDevShm) {
  auto world = ConnectPair();
  const std::string run = world->store.Get("conveyor/shm/run");
  auto leftovers = [&] {
    int found = 0;
    DIR* dir = opendir("/dev/shm");
    if (dir == nullptr) return found;
    while (dirent* entry = readdir(dir)) {
      if (std::strstr(entry->d_name, run.c_str()) != nullptr) ++found;
    }
    closedir(dir);
    return found;
  };
  EXPECT_EQ(leftovers(), 0) << "segments are unlinked once every rank has mapped them";
  world->channels.clear();
  EXPECT_EQ(leftovers(), 0);
}

TEST(ShmChannelTest, BothDirectionsAtOnce) {
  auto world = ConnectPair();
  const std::size_t n = 3 << 20;
  std::vector<std::vector<std::uint8_t>> got(2, std::vector<std::uint8_t>(n));
  auto rank = [&](int r) {
    return [&, r] {
      ShmChannel& c = *world->channels[r];
      std::vector<std::uint8_t> mine = Pattern(n, r);
      auto recv = c.Recv(got[r].data(), n, 1 - r, 9, nullptr);
      auto send = SendBytes(c, mine, 1 - r, 9);
      ExpectDone(c, *recv);
      ExpectDone(c, *send);
    };
  };
  RunRanks({rank(0), rank(1)});
  EXPECT_EQ(got[0], Pattern(n, 1));
  EXPECT_EQ(got[1], Pattern(n, 0));
}

TEST(ShmChannelTest, TagsMatchInAnyOrderAndSameTagsInPostingOrder) {
  auto world = ConnectPair();
  std::vector<std::vector<std::uint8_t>> sent;
  for (unsigned i = 0; i < 8; ++i) sent.push_back(Pattern(100 + i, i));
  std::vector<std::vector<std::uint8_t>> got(8);
  RunRanks({[&] {
              ShmChannel& c = *world->channels[0];
              std::vector<std::shared_ptr<ShmChannel::Op>> ops;
              // tags 0..5, then two more messages with tag 3
              for (unsigned i = 0; i < 8; ++i)
                ops.push_back(SendBytes(c, sent[i], 1, i < 6 ? i : 3));
              for (auto& op : ops) ExpectDone(c, *op);
            },
            [&] {
              ShmChannel& c = *world->channels[1];
              std::vector<std::shared_ptr<ShmChannel::Op>> ops(8);
              const unsigned order[] = {5, 3, 6, 7, 0, 4, 2, 1};  // index into `sent`
              for (unsigned i : order) {
                got[i].resize(sent[i].size());
                std::uint32_t tag = i < 6 ? i : 3;
                ops[i] = c.Recv(got[i].data(), got[i].size(), 0, tag, nullptr);
              }
              for (int i = 7; i >= 0; --i) ExpectDone(c, *ops[i]);
            }});
  // Same tag 3: index 3, then 6, then 7 were sent; the receives were posted 3, 6, 7 too.
  for (unsigned i = 0; i < 8; ++i) EXPECT_EQ(got[i], sent[i]) << "message " << i;
}

TEST(ShmChannelTest, ReceivePostedAfterTheMessageArrivedComesFromTheStash) {
  auto world = ConnectPair();
  ShmChannel& a = *world->channels[0];
  ShmChannel& b = *world->channels[1];
  std::vector<std::uint8_t> early = Pattern(5000, 1), later = Pattern(10, 2);
  ExpectDone(a, *SendBytes(a, early, 1, 4));
  ExpectDone(a, *SendBytes(a, later, 1, 5));
  std::vector<std::uint8_t> got_later(10), got_early(5000);
  ExpectDone(b, *b.Recv(got_later.data(), 10, 0, 5, nullptr));  // stashes tag 4 on the way
  auto recv = b.Recv(got_early.data(), got_early.size(), 0, 4, nullptr);
  EXPECT_TRUE(b.Test(*recv));
  EXPECT_EQ(got_early, early);
  EXPECT_EQ(got_later, later);
}

TEST(ShmChannelTest, MessagesManyTimesLargerThanTheRing) {
  ShmChannelOptions options;
  options.ring_bytes = 64 << 10;
  auto world = ConnectPair(options);
  const std::size_t n = (1 << 20) + 13;
  std::vector<std::uint8_t> got0(n), got1(n), got_partial(n);
  std::promise<void> posted, stashed;
  RunRanks({[&] {
              ShmChannel& c = *world->channels[0];
              auto big = Pattern(n, 0);
              auto send = SendBytes(c, big, 1, 1);
              EXPECT_FALSE(c.Test(*send)) << "cannot fit in one ring";
              auto recv = c.Recv(got0.data(), n, 1, 2, nullptr);
              ExpectDone(c, *recv);
              ExpectDone(c, *send);
              // The second one: the receiver stashes its first part, then posts its receive.
              auto second = Pattern(n, 5);
              auto partial = SendBytes(c, second, 1, 3);
              posted.set_value();
              stashed.get_future().wait();
              ExpectDone(c, *partial);
            },
            [&] {
              ShmChannel& c = *world->channels[1];
              auto big = Pattern(n, 1);
              auto recv = c.Recv(got1.data(), n, 0, 1, nullptr);
              auto send = SendBytes(c, big, 0, 2);
              ExpectDone(c, *send);
              ExpectDone(c, *recv);
              posted.get_future().wait();
              EXPECT_EQ(c.Flush(milliseconds(0)).status, Status::kDone);  // progresses once
              auto partial = c.Recv(got_partial.data(), n, 0, 3, nullptr);
              stashed.set_value();
              ExpectDone(c, *partial);
            }});
  EXPECT_EQ(got0, Pattern(n, 1));
  EXPECT_EQ(got1, Pattern(n, 0));
  EXPECT_EQ(got_partial, Pattern(n, 5));
}

TEST(ShmChannelTest, ManySmallMessagesWrapAroundASmallRing) {
  ShmChannelOptions options;
  options.ring_bytes = 4096;
  auto world = ConnectPair(options);
  constexpr int kCount = 5000;
  auto size_of = [](int i) { return static_cast<std::size_t>((i * 37) % 301); };  // 0 included
  auto rank = [&](int r) {
    return [&, r] {
      ShmChannel& c = *world->channels[r];
      std::vector<std::vector<std::uint8_t>> out, in;
      std::vector<std::shared_ptr<ShmChannel::Op>> sends, recvs;
      for (int i = 0; i < kCount; ++i) {
        out.push_back(Pattern(size_of(i), i + r));
        in.emplace_back(size_of(i));
      }
      for (int i = 0; i < kCount; ++i) {
        sends.push_back(SendBytes(c, out[i], 1 - r, i % 7));
        if (i % 3 == 0) {
          for (int j = static_cast<int>(recvs.size()); j <= i; ++j) {
            recvs.push_back(c.Recv(in[j].data(), in[j].size(), 1 - r, j % 7, nullptr));
          }
        }
      }
      for (int j = static_cast<int>(recvs.size()); j < kCount; ++j) {
        recvs.push_back(c.Recv(in[j].data(), in[j].size(), 1 - r, j % 7, nullptr));
      }
      for (int i = 0; i < kCount; ++i) {
        ExpectDone(c, *recvs[i]);
        ASSERT_EQ(in[i], Pattern(size_of(i), i + 1 - r)) << "message " << i;
      }
      for (auto& send : sends) ExpectDone(c, *send);
    };
  };
  RunRanks({rank(0), rank(1)});
}

TEST(ShmChannelTest, SendIsCompleteOnceItsBytesAreInTheRing) {
  ShmChannelOptions options;
  options.ring_bytes = 64 << 10;
  auto world = ConnectPair(options);
  ShmChannel& a = *world->channels[0];
  auto keep = std::make_shared<int>(7);
  std::weak_ptr<int> kept = keep;
  std::vector<std::uint8_t> small = Pattern(32 << 10, 3);
  auto send = a.Send(small.data(), small.size(), 1, 0, std::move(keep));
  EXPECT_TRUE(a.Test(*send)) << "fits in the ring: done without the receiver";
  EXPECT_TRUE(kept.expired()) << "its buffer is released at once";
  std::vector<std::uint8_t> large = Pattern(48 << 10, 4);  // fits once `small` is read
  auto blocked = SendBytes(a, large, 1, 1);
  EXPECT_FALSE(a.Test(*blocked)) << "needs the receiver to free space";
  std::vector<std::uint8_t> got_small(small.size()), got_large(large.size());
  ShmChannel& b = *world->channels[1];
  ExpectDone(b, *b.Recv(got_small.data(), got_small.size(), 0, 0, nullptr));
  auto recv = b.Recv(got_large.data(), got_large.size(), 0, 1, nullptr);
  ExpectDone(a, *blocked);
  ExpectDone(b, *recv);
  EXPECT_EQ(got_large, large);
}

TEST(ShmChannelTest, KeepMovingDeliversWhileTheSenderIsBusyElsewhere) {
  ShmChannelOptions options;
  options.ring_bytes = 16 << 10;
  auto world = ConnectPair(options);
  const std::size_t n = 1 << 20;
  std::vector<std::uint8_t> got(n);
  std::promise<void> received;
  RunRanks({[&] {
              ShmChannel& c = *world->channels[0];
              auto big = Pattern(n, 8);
              auto send = SendBytes(c, big, 1, 0);
              // Blocks outside the channel (as in a Gloo collective) until the peer has it.
              ShmChannel::Background keep = c.KeepMoving();
              received.get_future().wait();
              EXPECT_TRUE(c.Test(*send));
            },
            [&] {
              ShmChannel& c = *world->channels[1];
              ExpectDone(c, *c.Recv(got.data(), n, 0, 0, nullptr));
              received.set_value();
            }});
  EXPECT_EQ(got, Pattern(n, 8));
}

TEST(ShmChannelTest, WrongSizeFailsTheReceive) {
  auto world = ConnectPair();
  ShmChannel& a = *world->channels[0];
  ShmChannel& b = *world->channels[1];
  std::vector<std::uint8_t> message = Pattern(100, 0), next = Pattern(8, 1);
  ExpectDone(a, *SendBytes(a, message, 1, 0));
  ExpectDone(a, *SendBytes(a, next, 1, 1));
  std::vector<std::uint8_t> got(50), got_next(8);
  ShmChannel::Outcome outcome = b.Wait(*b.Recv(got.data(), got.size(), 0, 0, nullptr), kTimeout);
  EXPECT_EQ(outcome.status, Status::kSizeMismatch);
  EXPECT_EQ(outcome.detail, "the message has 100 bytes, the buffer 50");
  ExpectDone(b, *b.Recv(got_next.data(), 8, 0, 1, nullptr));  // the stream stays in step
  EXPECT_EQ(got_next, next);
}

TEST(ShmChannelTest, WaitTimesOut) {
  auto world = ConnectPair();
  std::vector<std::uint8_t> got(4);
  auto recv = world->channels[1]->Recv(got.data(), 4, 0, 0, nullptr);
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(world->channels[1]->Wait(*recv, milliseconds(200)).status, Status::kTimedOut);
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(200));
}

TEST(ShmChannelTest, AbortWakesASleepingWait) {
  auto world = ConnectPair();
  std::vector<std::uint8_t> got(4);
  auto recv = world->channels[1]->Recv(got.data(), 4, 0, 0, nullptr);
  std::thread trigger([&] {
    std::this_thread::sleep_for(milliseconds(100));
    world->aborts[1]->Trigger("rank 0 failed: test");
  });
  ShmChannel::Outcome outcome = world->channels[1]->Wait(*recv, kTimeout);
  trigger.join();
  EXPECT_EQ(outcome.status, Status::kAborted);
  EXPECT_EQ(outcome.detail, "rank 0 failed: test");
}

}  // namespace
}  // namespace conveyor
