#include "conveyor/comm/abort_signal.h"

#include <gtest/gtest.h>

namespace conveyor {
namespace {

TEST(AbortSignalTest, FirstTriggerWinsAndRunsSubscribersOnce) {
  auto signal = AbortSignal::Create();
  int calls = 0;
  auto subscription = signal->Subscribe([&] { ++calls; });
  EXPECT_FALSE(signal->triggered());
  EXPECT_TRUE(signal->Trigger("rank 2 failed: x"));
  EXPECT_FALSE(signal->Trigger("rank 3 failed: y"));
  EXPECT_TRUE(signal->triggered());
  EXPECT_EQ(signal->reason(), "rank 2 failed: x");
  EXPECT_EQ(calls, 1);
}

TEST(AbortSignalTest, LateSubscriberRunsAtOnceAndUnsubscribedOneNever) {
  auto signal = AbortSignal::Create();
  int early = 0;
  {
    auto gone = signal->Subscribe([&] { ++early; });
  }
  signal->Trigger("stop");
  EXPECT_EQ(early, 0);
  int late = 0;
  auto subscription = signal->Subscribe([&] { ++late; });
  EXPECT_EQ(late, 1);
}

}  // namespace
}  // namespace conveyor
