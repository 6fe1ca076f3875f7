#include "conveyor/schedule/pipeline_limits.h"

#include <gtest/gtest.h>

#include <string>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

std::string Refusal(std::string_view schedule, ScheduleOptions options) {
  try {
    CheckPipelineSize(schedule, options);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(PipelineLimitsTest, SizesAtTheLimitsPass) {
  EXPECT_NO_THROW(CheckPipelineSize("1f1b", {kMaxRanks, 64, 0}));
  EXPECT_NO_THROW(CheckPipelineSize("1f1b", {4, kMaxMicrobatches, 0}));
  EXPECT_NO_THROW(CheckProgramSize(2, 4, kMaxMicrobatches));
}

TEST(PipelineLimitsTest, EachFlagIsNamedWithItsRange) {
  EXPECT_EQ(Refusal("1f1b", {100000, 8, 0}), "--pp must be within [1, 4096], got 100000");
  EXPECT_EQ(Refusal("1f1b", {4, 2147483647, 0}),
            "--microbatches must be within [1, 65536], got 2147483647");
  EXPECT_EQ(Refusal("interleaved-1f1b", {4, 8, -1}), "--chunks must be within [0, 64], got -1");
  EXPECT_EQ(Refusal("1f1b", {0, 8, 0}), "--pp must be within [1, 4096], got 0");
}

TEST(PipelineLimitsTest, ProductCountsTheScheduleDefaultChunks) {
  // 1F1B: 1 stage per rank, 2^18 stage micro-batches: at the limit.
  EXPECT_EQ(Refusal("1f1b", {4, 65536, 0}), "");
  // ZB-V: 2 stages per rank, twice as many.
  const std::string why = Refusal("zb-v", {4, 65536, 0});
  EXPECT_NE(why.find("8 stages x 65536 micro-batches = 524288"), std::string::npos) << why;
  EXPECT_NE(why.find("limit of 262144"), std::string::npos) << why;
}

TEST(PipelineLimitsTest, LoadedProgramsAreBoundedBeforeAnyAllocation) {
  EXPECT_THROW(CheckProgramSize(4, 4, 1000002), UserError);
  EXPECT_THROW(CheckProgramSize(4, 1 << 30, 8), UserError);
  EXPECT_THROW(CheckProgramSize(5000, 5000, 1), UserError);
  EXPECT_THROW(CheckProgramSize(4, 1024, 1024), UserError);  // 2^20 stage micro-batches
}

}  // namespace
}  // namespace conveyor
