#include "conveyor/schedule/action.h"

#include <gtest/gtest.h>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

TEST(ActionTest, RoundTripsEveryForm) {
  for (const char* text :
       {"0F1", "2I3", "0W1", "3B0", "1SEND_F0", "2RECV_F0", "0SEND_B12", "1RECV_B4", "0REDUCE_GRAD",
        "(0F7;7B3)OVERLAP_F_B", "(6F4;1I0)OVERLAP_F_B", "127F1023"}) {
    EXPECT_EQ(ParseAction(text).ToString(), text);
  }
}

TEST(ActionTest, ParsesFields) {
  const Action a = ParseAction("12SEND_B34");
  EXPECT_EQ(a.op, Op::kSendB);
  EXPECT_EQ(a.stage, 12);
  EXPECT_EQ(a.microbatch, 34);
  const Action o = ParseAction(" (0F7;7I3)OVERLAP_F_B ");
  EXPECT_EQ(o.op, Op::kOverlapFB);
  EXPECT_EQ(o.ForwardHalf(), (Action{Op::kForward, 0, 7}));
  EXPECT_EQ(o.BackwardHalf(), (Action{Op::kBackwardInput, 7, 3}));
}

TEST(ActionTest, LegacyNaming) {
  EXPECT_EQ(ParseAction("2B3", Naming::kLegacy).op, Op::kBackwardInput);
  EXPECT_EQ(ParseAction("2BW3", Naming::kLegacy).op, Op::kBackward);
  EXPECT_EQ(ParseAction("2W3", Naming::kLegacy).op, Op::kBackwardWeight);
  EXPECT_EQ(ParseAction("2B3", Naming::kCurrent).op, Op::kBackward);
}

TEST(ActionTest, RejectsMalformedTextNamingIt) {
  for (const char* text : {"", "F1", "0X1", "0F", "0F1x", "0BW1", "(0F1)OVERLAP_F_B",
                           "(0B1;1F2)OVERLAP_F_B", "(0F1;1B2)", "0REDUCE_GRAD3", "0OVERLAP_F_B1"}) {
    try {
      ParseAction(text);
      ADD_FAILURE() << "accepted '" << text << "'";
    } catch (const UserError& e) {
      if (*text != '\0') {
        EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
      }
    }
  }
}

TEST(ActionTest, Classification) {
  EXPECT_TRUE(IsCompute(Op::kOverlapFB));
  EXPECT_FALSE(IsCompute(Op::kSendF));
  EXPECT_TRUE(IsComm(Op::kRecvB));
  EXPECT_FALSE(IsComm(Op::kReduceGrad));
  EXPECT_TRUE(IsBackwardish(Op::kBackwardInput));
  EXPECT_FALSE(IsBackwardish(Op::kBackwardWeight));
}

}  // namespace
}  // namespace conveyor
