#include "conveyor/cli/launch_flags.h"

#include <gtest/gtest.h>

#include <string>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

TEST(LaunchFlagsTest, AllowsAtLeast64LocalRanks) {
  EXPECT_GE(MaxLocalRanks(), 64);
  EXPECT_NO_THROW(LaunchFlags().CheckLocalRanks(64, "--pp"));
}

TEST(LaunchFlagsTest, RefusesMoreUnlessOversubscribed) {
  LaunchFlags flags;
  try {
    flags.CheckLocalRanks(MaxLocalRanks() + 1, "--pp");
    FAIL() << "accepted";
  } catch (const UserError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("--pp " + std::to_string(MaxLocalRanks() + 1) + " would start", 0), 0u)
        << what;
    EXPECT_NE(what.find("without --oversubscribe"), std::string::npos) << what;
  }
  flags.oversubscribe = true;
  EXPECT_NO_THROW(flags.CheckLocalRanks(MaxLocalRanks() + 1, "--pp"));
}

}  // namespace
}  // namespace conveyor
