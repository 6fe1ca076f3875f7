#include "conveyor/common/startup_breakdown.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "conveyor/common/process_stats.h"

namespace conveyor {
namespace {

// Ends `field` of `s` and checks that the phases then sum to the time since the process
// started, read just before and just after.
void EndAndCheck(StartupBreakdown& s, double StartupBreakdown::*field) {
  const double before = SecondsSinceProcessStart();
  s.End(field);
  const double after = SecondsSinceProcessStart();
  EXPECT_GE(s.total_s(), before);
  EXPECT_LE(s.total_s(), after);
}

TEST(StartupBreakdownTest, PhasesFollowOneAnotherFromTheProcessStart) {
  StartupBreakdown s;
  EndAndCheck(s, &StartupBreakdown::process_s);
  EXPECT_GE(s.process_s, 0);  // known to 10 ms: 0 this early
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EndAndCheck(s, &StartupBreakdown::rendezvous_s);
  EXPECT_GE(s.rendezvous_s, 0.0299);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EndAndCheck(s, &StartupBreakdown::device_s);
  EXPECT_GE(s.device_s, 0.0299);
  EXPECT_EQ(s.data_s, 0);
  // Ending a phase again extends it to now.
  const double device = s.device_s;
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EndAndCheck(s, &StartupBreakdown::device_s);
  EXPECT_GE(s.device_s, device + 0.0199);
  EXPECT_STREQ(kStartupPhases[0].name, "process");
  EXPECT_EQ(kStartupPhases[6].field, &StartupBreakdown::first_step_s);
}

}  // namespace
}  // namespace conveyor
