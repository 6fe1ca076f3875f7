#include "conveyor/optim/loss_scaler.h"

#include <gtest/gtest.h>

#include <string>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

TEST(LossScalerTest, OffIsOneAndNeverMoves) {
  LossScaler off;
  EXPECT_FALSE(off.enabled());
  EXPECT_FALSE(off.ShouldBackOff());
  for (int i = 0; i < 5; ++i) off.Grow();
  EXPECT_EQ(off.scale(), 1.0);
  EXPECT_EQ(off.good_steps(), 0);
}

TEST(LossScalerTest, DoublesAfterAWindowOfGoodStepsAndHalvesOnOverflow) {
  LossScaler s(1024, 3);
  s.Grow();
  s.Grow();
  EXPECT_EQ(s.scale(), 1024.0);
  EXPECT_EQ(s.good_steps(), 2);
  s.Grow();
  EXPECT_EQ(s.scale(), 2048.0);
  EXPECT_EQ(s.good_steps(), 0);
  s.Grow();
  s.Grow();  // two good steps, then an overflow: the count starts again
  ASSERT_TRUE(s.ShouldBackOff());
  s.BackOff();
  EXPECT_EQ(s.scale(), 1024.0);
  EXPECT_EQ(s.good_steps(), 0);
  s.Grow();
  s.Grow();
  EXPECT_EQ(s.scale(), 1024.0);
}

TEST(LossScalerTest, NeverBelowOneWhereOverflowIsNoLongerAMatterOfScale) {
  LossScaler s(4, 1000);
  s.BackOff();
  s.BackOff();
  EXPECT_EQ(s.scale(), 1.0);
  EXPECT_FALSE(s.ShouldBackOff());
  s.BackOff();
  EXPECT_EQ(s.scale(), 1.0);
}

TEST(LossScalerTest, RestoresACheckpointsStateAndRefusesBadOnes) {
  LossScaler s(65536, 2);
  s.Restore(512, 1);
  EXPECT_EQ(s.scale(), 512.0);
  s.Grow();
  EXPECT_EQ(s.scale(), 1024.0);
  EXPECT_THROW(s.Restore(0.5, 0), UserError);
  EXPECT_THROW(s.Restore(512, -1), UserError);
}

TEST(LossScalerTest, BadSettingsAreUserErrorsNamingThem) {
  try {
    LossScaler(0.5, 10);
    ADD_FAILURE() << "a scale below 1 was taken";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("--loss-scale must be"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("0.5"), std::string::npos) << e.what();
  }
  EXPECT_THROW(LossScaler(1024, 0), UserError);
  EXPECT_THROW(LossScaler(0x1p128, 10), UserError);
}

}  // namespace
}  // namespace conveyor
