#include "conveyor/comm/local_transport.h"

#include <ATen/ATen.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <functional>

#include "conveyor/comm/all_to_all_testing.h"
#include "conveyor/comm/rank_threads.h"
#include "conveyor/device/stream_order.h"

namespace conveyor {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Runs body(transport) for every rank of a local world of `n`, one thread each.
void RunWorld(int n, std::chrono::milliseconds timeout,
              const std::function<void(Transport&)>& body) {
  std::vector<std::unique_ptr<Transport>> world = LocalWorld(n, TransportOptions{timeout});
  RunRankThreads(world, [&](int r) { body(*world[r]); });
}

constexpr std::chrono::milliseconds kLong{30000};

TEST(LocalTransportTest, ReceivesPostedFirstAndSendsOutOfOrderMatchByTag) {
  constexpr int kRanks = 3;
  constexpr int kTags = 4;
  RunWorld(kRanks, kLong, [](Transport& t) {
    int left = (t.rank() + kRanks - 1) % kRanks;
    int right = (t.rank() + 1) % kRanks;
    std::vector<at::Tensor> buffers;
    std::vector<std::shared_ptr<Work>> recvs;
    for (int tag = 0; tag < kTags; ++tag) {
      buffers.push_back(at::zeros({2}));
      recvs.push_back(t.Recv(buffers.back(), left, tag));
    }
    std::vector<std::shared_ptr<Work>> sends;
    for (int tag = kTags - 1; tag >= 0; --tag) {
      sends.push_back(t.Send(at::full({2}, 100.0 * t.rank() + tag), right, tag));
    }
    for (auto& send : sends) send->Wait();
    for (int tag = 0; tag < kTags; ++tag) {
      recvs[tag]->Wait();
      EXPECT_TRUE(recvs[tag]->IsCompleted());
      EXPECT_EQ(buffers[tag][1].item<float>(), 100.0 * left + tag) << "rank " << t.rank();
    }
  });
}

TEST(LocalTransportTest, AllReduceSumsTensorsOfMixedShapesAndDtypes) {
  RunWorld(4, kLong, [](Transport& t) {
    std::vector<at::Tensor> tensors = {at::full({2, 3}, t.rank() + 1.0),
                                       at::full({5}, t.rank(), at::kLong)};
    t.AllReduceSum(tensors);
    t.Barrier();
    EXPECT_EQ(tensors[0][1][2].item<float>(), 10.0);
    EXPECT_EQ(tensors[1][4].item<int64_t>(), 6);
    EXPECT_EQ(tensors[1].scalar_type(), at::kLong);
  });
}

// Rank r's operand of a reduce-scatter of `numel` elements, non-contiguous.
at::Tensor ScatterInput(int r, int64_t numel) {
  return (at::arange(2 * numel, at::kDouble) * (r + 1) + 100.0 * r).slice(0, 0, 2 * numel, 2);
}

TEST(LocalTransportTest, ReduceScatterGivesEachRankItsPartOfTheSum) {
  for (int n = 1; n <= 4; ++n) {
    // Even, uneven, with empty parts, all on the last rank.
    std::vector<std::vector<int64_t>> cases = {std::vector<int64_t>(n, 3), {}, {}, {}};
    for (int r = 0; r < n; ++r) {
      cases[1].push_back(r + 1);
      cases[2].push_back(r % 2 == 0 ? 0 : 2 * r);
      cases[3].push_back(r == n - 1 ? 5 : 0);
    }
    for (const std::vector<int64_t>& counts : cases) {
      int64_t numel = 0;
      for (int64_t c : counts) numel += c;
      at::Tensor sum = at::zeros({numel}, at::kDouble);
      for (int r = 0; r < n; ++r) sum += ScatterInput(r, numel);
      RunWorld(n, kLong, [&](Transport& t) {
        const at::Tensor input = ScatterInput(t.rank(), numel);
        const at::Tensor before = input.clone();
        const at::Tensor part = t.ReduceScatterSum(input, counts);
        int64_t begin = 0;
        for (int r = 0; r < t.rank(); ++r) begin += counts[r];
        EXPECT_TRUE(part.is_contiguous());
        EXPECT_EQ(part.scalar_type(), at::kDouble);
        EXPECT_TRUE(part.equal(sum.narrow(0, begin, counts[t.rank()])))
            << n << " ranks, rank " << t.rank() << ", counts " << at::IntArrayRef(counts)
            << ": got " << part;
        EXPECT_TRUE(input.equal(before)) << "the input was modified";
      });
    }
  }
}

TEST(LocalTransportTest, ReduceScatterWithDifferentCountsFailsEveryRankNamingThem) {
  RunWorld(2, kLong, [](Transport& t) {
    const std::vector<int64_t> counts =
        t.rank() == 0 ? std::vector<int64_t>{1, 3} : std::vector<int64_t>{2, 2};
    try {
      t.ReduceScatterSum(at::zeros({4}), counts);
      ADD_FAILURE() << "rank " << t.rank() << ": counts [1, 3] met counts [2, 2]";
    } catch (const CommError& e) {
      EXPECT_THAT(e.what(), AllOf(HasSubstr("reduce-scatter #0 failed"), HasSubstr("[1, 3]"),
                                  HasSubstr("[2, 2]"), HasSubstr("every rank must pass the same")));
    }
  });
}

TEST(LocalTransportTest, AllGatherReturnsEveryRanksTensorInRankOrder) {
  constexpr int kRanks = 3;
  RunWorld(kRanks, kLong, [](Transport& t) {
    // A transposed (non-contiguous) operand; element r is rank r's, contiguous, as given.
    const at::Tensor local = (at::arange(6, at::kLong).view({2, 3}) + 10 * t.rank()).t();
    std::vector<at::Tensor> all = t.AllGather(local);
    ASSERT_EQ(all.size(), static_cast<size_t>(kRanks));
    for (int r = 0; r < kRanks; ++r) {
      EXPECT_TRUE(all[r].is_contiguous());
      EXPECT_EQ(all[r].scalar_type(), at::kLong);
      EXPECT_TRUE(all[r].equal((at::arange(6, at::kLong).view({2, 3}) + 10 * r).t()))
          << "rank " << t.rank() << " got " << all[r] << " for rank " << r;
    }
    // The results are this rank's own: changing them reaches no other rank.
    for (at::Tensor& x : all) x.fill_(-1);
    t.Barrier();
    std::vector<at::Tensor> again = t.AllGather(at::full({}, t.rank() + 0.5, at::kDouble));
    for (int r = 0; r < kRanks; ++r) EXPECT_EQ(again[r].item<double>(), r + 0.5);
  });
}

TEST(LocalTransportTest, AllToAllDeliversEveryRanksPartsIncludingEmptyOnes) {
  for (int ranks : {1, 2, 4}) RunWorld(ranks, kLong, ExpectAllToAllDelivers);
  RunWorld(4, kLong, [](Transport& t) {
    std::unique_ptr<Transport> group = t.NewGroup({3, 1, 2});
    if (group != nullptr) ExpectAllToAllDelivers(*group);
  });
}

TEST(LocalTransportTest, AllToAllCountsThatDisagreeFailEveryRankNamingThePair) {
  RunWorld(3, kLong, [](Transport& t) {
    // Rank 2 sends rank 0 two rows; rank 0 expects one from it.
    const std::vector<int64_t> send =
        t.rank() == 2 ? std::vector<int64_t>{2, 0, 0} : std::vector<int64_t>{0, 0, 0};
    const std::vector<int64_t> recv =
        t.rank() == 0 ? std::vector<int64_t>{0, 0, 1} : std::vector<int64_t>{0, 0, 0};
    try {
      t.AllToAll(at::zeros({t.rank() == 2 ? 2 : 0, 4}), send, recv);
      ADD_FAILURE() << "rank " << t.rank() << ": 2 rows sent, 1 received";
    } catch (const CommError& e) {
      EXPECT_THAT(e.what(), AllOf(HasSubstr("all-to-all #0 failed"),
                                  HasSubstr("rank 2 sends 2 rows to rank 0, which receives 1")));
    }
  });
  RunWorld(2, kLong, [](Transport& t) {
    try {  // rows of other shapes
      t.AllToAll(at::zeros({1, 3 + t.rank()}), {0, 1}, {0, 1});
      ADD_FAILURE() << "rows of 3 and 4 elements met";
    } catch (const CommError& e) {
      EXPECT_THAT(e.what(), HasSubstr("every rank must pass the same"));
    }
  });
}

TEST(LocalTransportTest, BadAllToAllCountsAreUserErrorsNamingThem) {
  auto world = LocalWorld(2);
  auto error = [&](const at::Tensor& input, const std::vector<int64_t>& send,
                   const std::vector<int64_t>& recv) -> std::string {
    try {
      world[1]->AllToAll(input, send, recv);
    } catch (const UserError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_THAT(error(at::zeros({3, 2}), {1, 1}, {0, 0}),
              HasSubstr("rank 1: all-to-all with send counts [1, 1]: they sum to 2 but the input "
                        "has 3 rows"));
  EXPECT_THAT(error(at::zeros({2}), {1, 1, 0}, {0, 0}),
              HasSubstr("send counts [1, 1, 0]: 3 counts for a group of 2 ranks"));
  EXPECT_THAT(error(at::zeros({2}), {1, 1}, {-1, 0}),
              HasSubstr("receive counts [-1, 0]: a count is negative"));
  EXPECT_THAT(error(at::zeros({}), {0, 0}, {0, 0}), HasSubstr("a 0-dimensional tensor"));
}

TEST(LocalTransportTest, BroadcastCopiesTheRootsTensorIntoEveryRank) {
  RunWorld(4, kLong, [](Transport& t) {
    at::Tensor x = at::full({3, 2}, t.rank() * 1.0).t();  // non-contiguous on every rank
    t.Broadcast(x, 2);
    EXPECT_TRUE(x.equal(at::full({2, 3}, 2.0))) << "rank " << t.rank() << ": " << x;
    at::Tensor y = at::full({1}, t.rank(), at::kInt);
    t.Broadcast(y, 0);
    EXPECT_EQ(y.item<int>(), 0);
  });
}

TEST(LocalTransportTest, SubgroupGathersAndBroadcastsAmongItsMembers) {
  RunWorld(4, kLong, [](Transport& t) {
    std::unique_ptr<Transport> group = t.NewGroup({3, 1});
    if (group == nullptr) return;
    std::vector<at::Tensor> all = group->AllGather(at::full({2}, t.rank() * 1.0));
    ASSERT_EQ(all.size(), 2u);
    EXPECT_EQ(all[0][0].item<float>(), 3.0);  // group rank 0 is world rank 3
    EXPECT_EQ(all[1][1].item<float>(), 1.0);
    at::Tensor x = at::full({1}, t.rank() * 1.0);
    group->Broadcast(x, 1);
    EXPECT_EQ(x.item<float>(), 1.0);
  });
}

TEST(LocalTransportTest, MismatchedGatherOrBroadcastOperandsFailEveryRankNamingThem) {
  RunWorld(3, kLong, [](Transport& t) {
    try {
      t.AllGather(at::zeros({t.rank() == 2 ? 3 : 2}));
      ADD_FAILURE() << "rank " << t.rank() << ": a [3] operand was gathered with [2] ones";
    } catch (const CommError& e) {
      // Whichever rank came first is the reference; rank 2 is named either way.
      EXPECT_THAT(e.what(), AllOf(HasSubstr("rank " + std::to_string(t.rank()) +
                                            ": all-gather #0 failed: rank "),
                                  HasSubstr("shape [3]"), HasSubstr("shape [2]"),
                                  HasSubstr("rank 2"), HasSubstr("every rank must pass the same")));
    }
  });
  RunWorld(2, kLong, [](Transport& t) {
    at::Tensor x = at::zeros({2}, t.rank() == 1 ? at::kLong : at::kFloat);
    EXPECT_THROW(
        try { t.Broadcast(x, 0); } catch (const CommError& e) {
          EXPECT_THAT(e.what(), AllOf(HasSubstr("broadcast #0 failed"), HasSubstr("dtype Long"),
                                      HasSubstr("dtype Float")));
          throw;
        },
        CommError);
  });
  RunWorld(2, kLong, [](Transport& t) {
    at::Tensor x = at::zeros({2});
    EXPECT_THROW(
        try { t.Broadcast(x, t.rank()); } catch (const CommError& e) {
          EXPECT_THAT(e.what(), AllOf(HasSubstr("broadcast #0 failed"),
                                      HasSubstr("every rank must name the same root")));
          throw;
        },
        CommError);
  });
}

TEST(LocalTransportTest, SubgroupHasItsOwnRanksAndNonMembersGetNull) {
  RunWorld(4, kLong, [](Transport& t) {
    std::unique_ptr<Transport> group = t.NewGroup({3, 1});
    if (t.rank() == 0 || t.rank() == 2) {
      EXPECT_EQ(group, nullptr);
      return;
    }
    ASSERT_NE(group, nullptr);
    EXPECT_EQ(group->world_size(), 2);
    EXPECT_EQ(group->rank(), t.rank() == 3 ? 0 : 1);
    std::vector<at::Tensor> x = {at::full({1}, t.rank() * 1.0)};
    group->AllReduceSum(x);
    EXPECT_EQ(x[0].item<float>(), 4.0);
    at::Tensor got = at::zeros({1});
    auto recv = group->Recv(got, 1 - group->rank(), 9);
    group->Send(at::full({1}, t.rank() * 10.0), 1 - group->rank(), 9)->Wait();
    recv->Wait();
    EXPECT_EQ(got.item<float>(), t.rank() == 3 ? 10.0 : 30.0);
  });
}

TEST(LocalTransportTest, DroppedSendHandleStillDelivers) {
  RunWorld(2, kLong, [](Transport& t) {
    if (t.rank() == 0) {
      at::Tensor x = at::arange(6, at::kFloat);
      t.Send(x, 1, 5);  // handle dropped
      x.fill_(-1);      // the message was taken at Send time
      return;
    }
    at::Tensor got = at::zeros({6});
    t.Recv(got, 0, 5)->Wait();
    EXPECT_EQ(got[5].item<float>(), 5.0);
  });
}

TEST(LocalTransportTest, ReceiveWithoutSenderTimesOutNamingPeerAndTag) {
  RunWorld(2, std::chrono::milliseconds(200), [](Transport& t) {
    if (t.rank() == 0) return;
    auto recv = t.Recv(at::zeros({1}), 0, 42);
    try {
      recv->Wait();
      ADD_FAILURE() << "Wait returned without a sender";
    } catch (const CommError& e) {
      EXPECT_THAT(e.what(), AllOf(HasSubstr("rank 1: recv from rank 0 (tag 42)"),
                                  HasSubstr("timed out after 200 ms")));
    }
  });
}

TEST(LocalTransportTest, ReportedFailureAbortsOtherRanksNamingTheRank) {
  RunWorld(3, kLong, [](Transport& t) {
    if (t.rank() == 1) {
      t.ReportFailure("loss is NaN");
      return;
    }
    auto recv = t.Recv(at::zeros({1}), 1, 0);
    EXPECT_THROW(
        try { recv->Wait(); } catch (const CommError& e) {
          EXPECT_THAT(e.what(), HasSubstr("aborted: rank 1 failed: loss is NaN"));
          throw;
        },
        CommError);
    EXPECT_THROW(t.Barrier(), CommError);
    EXPECT_THROW(t.AllGather(at::zeros({1})), CommError);
  });
}

// Matched by order, as NCCL matches: the same posting order on both sides works whatever
// the tags' order; another order fails the receive naming both tags.
TEST(LocalTransportTest, MatchedByOrderMessagesNeedOneOrderOnBothSides) {
  TransportOptions options{kLong};
  options.match_by_order = true;
  for (const bool same_order : {true, false}) {
    auto world = LocalWorld(2, options);
    std::string error;
    RunRankThreads(world, [&](int r) {
      Transport& t = *world[r];
      if (r == 0) {
        t.Send(at::full({2}, 7.0), 1, 7);  // tag 7 first, then tag 3
        t.Send(at::full({2}, 3.0), 1, 3);
        return;
      }
      const std::vector<std::uint32_t> tags =
          same_order ? std::vector<std::uint32_t>{7, 3} : std::vector<std::uint32_t>{3, 7};
      for (const std::uint32_t tag : tags) {
        at::Tensor buffer = at::zeros({2});
        try {
          t.Recv(buffer, 0, tag)->Wait();
          EXPECT_EQ(buffer[0].item<float>(), tag);
        } catch (const CommError& e) {
          error = e.what();
          return;
        }
      }
    });
    if (same_order) {
      EXPECT_EQ(error, "");
    } else {
      EXPECT_THAT(error, HasSubstr("tag 3"));
      EXPECT_THAT(error, HasSubstr("matched by order a message of tag 7"));
    }
  }
}

TEST(LocalTransportTest, MismatchedBufferFailsTheReceive) {
  RunWorld(2, kLong, [](Transport& t) {
    if (t.rank() == 0) {
      t.Send(at::zeros({4}), 1, 0)->Wait();
      return;
    }
    try {
      t.Recv(at::zeros({3}), 0, 0)->Wait();
      ADD_FAILURE() << "a [4] message filled a [3] buffer";
    } catch (const CommError& e) {
      EXPECT_THAT(e.what(), HasSubstr("shape [4]"));
    }
  });
}

TEST(LocalTransportTest, BadArgumentsAreUserErrors) {
  auto world = LocalWorld(2);
  EXPECT_THROW(world[0]->Send(at::zeros({1}), 0, 0), UserError);
  EXPECT_THROW(world[0]->Send(at::zeros({1}), 2, 0), UserError);
  EXPECT_THROW(world[0]->Recv(at::zeros({2, 2}).t(), 1, 0), UserError);
  EXPECT_THROW(world[0]->Send(at::zeros({1}), 1, Transport::kMaxTag + 1), UserError);
  EXPECT_THROW(world[0]->NewGroup({0, 0}), UserError);
  EXPECT_THROW(world[0]->NewGroup({}), UserError);
  at::Tensor x = at::zeros({1});
  EXPECT_THROW(world[0]->Broadcast(x, 2), UserError);
  EXPECT_THROW(world[0]->Broadcast(x, -1), UserError);
  EXPECT_THROW(world[0]->AllGather(at::Tensor()), UserError);
  EXPECT_THROW(LocalWorld(0), UserError);
}

TEST(LocalTransportTest, BadReduceScatterCountsAreUserErrorsNamingThem) {
  auto world = LocalWorld(2);
  auto error = [&](const at::Tensor& input, const std::vector<int64_t>& counts) -> std::string {
    try {
      world[1]->ReduceScatterSum(input, counts);
    } catch (const UserError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_THAT(error(at::zeros({3}), {1, 1, 1}),
              AllOf(HasSubstr("rank 1: reduce-scatter with counts [1, 1, 1]"),
                    HasSubstr("3 counts for a group of 2 ranks")));
  EXPECT_THAT(error(at::zeros({3}), {4, -1}), HasSubstr("[4, -1]: a count is negative"));
  EXPECT_THAT(error(at::zeros({3}), {1, 1}),
              HasSubstr("[1, 1]: they sum to 2 but the input has 3 elements"));
  EXPECT_THAT(error(at::zeros({2, 2}), {2, 2}),
              HasSubstr("a tensor of shape [2, 2]: the input must be 1-D"));
  EXPECT_THAT(error(at::Tensor(), {0, 0}), HasSubstr("of an undefined tensor"));
}

// Ranks as threads on one GPU, each on its own stream: a message made by a long chain of
// kernels on the sender's stream arrives whole whether the receive or the send comes first,
// and an all-reduce sums what the ranks' streams computed.
TEST(LocalTransportTest, MessagesBetweenStreamsOfOneGpuArriveComplete) {
  if (torch::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const c10::Device gpu(c10::DeviceType::CUDA, 0);
  for (const bool recv_first : {true, false}) {
    auto world = LocalWorld(2);
    at::Tensor got, sum;
    RunRankThreads(world, [&](int r) {
      c10::impl::VirtualGuardImpl guard(gpu.type());
      guard.setDevice(gpu);
      guard.exchangeStream(*StreamFromPool(gpu));
      Transport& t = *world[r];
      const auto options = at::TensorOptions().device(gpu);
      if (r == 0) {
        if (recv_first) t.Barrier();  // the receive is posted
        at::Tensor x = at::zeros({1 << 20}, options);
        for (int k = 0; k < 200; ++k) x.add_(1);  // 200 kernels queued on this stream
        t.Send(x, 1, 7)->Wait();
        if (!recv_first) t.Barrier();
      } else {
        at::Tensor buffer = at::full({1 << 20}, -1.0, options);
        std::shared_ptr<Work> work;
        if (recv_first) {
          work = t.Recv(buffer, 0, 7);
          t.Barrier();
        } else {
          t.Barrier();  // the message waits, copied on the sender's stream
          work = t.Recv(buffer, 0, 7);
        }
        work->Wait();
        got = buffer.to(at::kCPU);
      }
      std::vector<at::Tensor> operand = {at::full({8}, r + 1.0, options).mul_(2)};
      t.AllReduceSum(operand);
      if (r == 1) sum = operand[0].to(at::kCPU);
    });
    EXPECT_TRUE(at::equal(got, at::full({1 << 20}, 200.0))) << "recv first " << recv_first;
    EXPECT_TRUE(at::equal(sum, at::full({8}, 6.0)));
  }
}

}  // namespace
}  // namespace conveyor
