#include "conveyor/device/stream_order.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace conveyor {
namespace {

TEST(StreamOrderTest, TheCpuHasNoStreamsToOrder) {
  const c10::Device cpu(c10::DeviceType::CPU);
  EXPECT_FALSE(StreamFromPool(cpu).has_value());
  StreamMark::Here(cpu).MakeCurrentStreamWait();  // nothing to wait for
  at::Tensor t = at::ones({4});
  RecordCurrentStreamUse(t);
  SynchronizeCurrentStream(cpu);
  EXPECT_TRUE(at::equal(t, at::ones({4})));
}

}  // namespace
}  // namespace conveyor
