#include "conveyor/comm/stream_order.h"

#include <ATen/ATen.h>
#include <torch/cuda.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <gtest/gtest.h>

#include "conveyor/comm/local_transport.h"
#include "conveyor/comm/rank_threads.h"

namespace conveyor {
namespace {

bool HasGpu() { return torch::cuda::device_count() > 0; }

TEST(StreamOrderTest, TheCpuHasNoStreamsToOrder) {
  const c10::Device cpu(c10::DeviceType::CPU);
  EXPECT_FALSE(StreamFromPool(cpu).has_value());
  StreamMark::Here(cpu).MakeCurrentStreamWait();  // nothing to wait for
  at::Tensor t = at::ones({4});
  RecordCurrentStreamUse(t);
  SynchronizeCurrentStream(cpu);
  EXPECT_TRUE(at::equal(t, at::ones({4})));
}

// Ranks as threads on one GPU, each on its own stream: a message made by a long chain of
// kernels on the sender's stream arrives whole whether the receive or the send comes first,
// and an all-reduce sums what the ranks' streams computed.
TEST(StreamOrderTest, MessagesBetweenStreamsOfOneGpuArriveComplete) {
  if (!HasGpu()) GTEST_SKIP() << "no CUDA device";
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
