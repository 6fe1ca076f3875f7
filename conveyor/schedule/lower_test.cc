#include "conveyor/schedule/lower.h"

#include <gtest/gtest.h>

#include "conveyor/schedule/program_testing.h"
#include "conveyor/schedule/verify.h"

namespace conveyor {
namespace {

TEST(LowerTest, InsertsSendAfterProducerAndRecvBeforeConsumer) {
  const Program gpipe = MakeProgram(Layout::Loop(2, 1, 2), {"0F0 0F1 0B0 0B1", "1F0 1F1 1B0 1B1"});
  const Program lowered = Lower(gpipe);
  EXPECT_EQ(lowered.ToText(),
            "rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1\n"
            "rank 1: 1RECV_F0 1F0 1RECV_F1 1F1 1B0 1SEND_B0 1B1 1SEND_B1\n");
  EXPECT_TRUE(Verify(lowered).empty()) << FormatFindings(Verify(lowered));
}

TEST(LowerTest, SameRankHandOffNeedsNoComms) {
  const Program p = MakeProgram(Layout::Loop(1, 2, 1), {"0F0 1F0 1B0 0B0"});
  EXPECT_FALSE(Lower(p).has_comms());
  // V placement: stages 1 and 2 share rank 1.
  const Program v = MakeProgram(Layout::V(2, 1), {"0F0 3F0 3B0 0B0", "1F0 2F0 2B0 1B0"});
  const Program lowered = Lower(v);
  EXPECT_EQ(lowered.ToText(),
            "rank 0: 0F0 0SEND_F0 3RECV_F0 3F0 3B0 3SEND_B0 0RECV_B0 0B0\n"
            "rank 1: 1RECV_F0 1F0 2F0 2SEND_F0 2RECV_B0 2B0 1B0 1SEND_B0\n");
}

TEST(LowerTest, GradReductionsFollowEachStagesLastWeightGradient) {
  // Split backward: stage 0's last W is its final gradient, after the send that follows.
  const Program zb = Lower(
      MakeProgram(Layout::Loop(2, 1, 2), {"0F0 0F1 0I0 0I1 0W0 0W1", "1F0 1F1 1I0 1W0 1I1 1W1"}));
  const Program reduced = WithGradReductions(zb);
  EXPECT_EQ(reduced.ToText(),
            "rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0I0 0RECV_B1 0I1 0W0 0W1 0REDUCE_GRAD\n"
            "rank 1: 1RECV_F0 1F0 1RECV_F1 1F1 1I0 1SEND_B0 1W0 1I1 1SEND_B1 1W1 1REDUCE_GRAD\n");
  EXPECT_TRUE(Verify(reduced).empty()) << FormatFindings(Verify(reduced));
  EXPECT_EQ(WithGradReductions(reduced).ToText(), reduced.ToText());  // idempotent
  // Full backward, two stages on one rank: each stage's after its own last B (and its send).
  const Program v = Lower(MakeProgram(Layout::V(2, 1), {"0F0 3F0 3B0 0B0", "1F0 2F0 2B0 1B0"}));
  EXPECT_EQ(WithGradReductions(v).ranks[1], (std::vector<Action>{{Op::kRecvF, 1, 0},
                                                                 {Op::kForward, 1, 0},
                                                                 {Op::kForward, 2, 0},
                                                                 {Op::kSendF, 2, 0},
                                                                 {Op::kRecvB, 2, 0},
                                                                 {Op::kBackward, 2, 0},
                                                                 {Op::kReduceGrad, 2},
                                                                 {Op::kBackward, 1, 0},
                                                                 {Op::kSendB, 1, 0},
                                                                 {Op::kReduceGrad, 1}}));
}

TEST(LowerTest, LoweringIsIdempotent) {
  const Program p = MakeProgram(Layout::Loop(2, 1, 2), {"0F0 0F1 0B0 0B1", "1F0 1B0 1F1 1B1"});
  const Program once = Lower(p);
  EXPECT_EQ(Lower(once).ToText(), once.ToText());
}

TEST(LowerTest, OverlapSendsBothHalves) {
  const Program p =
      MakeProgram(Layout::Loop(2, 1, 2), {"0F0 0F1 0B0 0B1", "1F0 (1F1;1B0)OVERLAP_F_B 1B1"});
  const Program lowered = Lower(p);
  EXPECT_EQ(lowered.ranks[1][3].ToString(), "(1F1;1B0)OVERLAP_F_B");
  EXPECT_EQ(lowered.ranks[1][4].ToString(), "1SEND_B0");
  EXPECT_TRUE(Verify(lowered).empty()) << FormatFindings(Verify(lowered));
}

TEST(LowerTest, DeadlockNamesEveryBlockedRank) {
  // Rank 0 wants the gradient of micro-batch 0 before rank 1 may run its forward.
  const Program p = MakeProgram(Layout::Loop(3, 1, 1), {"0F0 0B0", "1B0 1F0", ""});
  try {
    Lower(p);
    FAIL() << "no deadlock reported";
  } catch (const DeadlockError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rank 0: blocked at action #1 0B0, waiting for 1I0 (rank 1)"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("rank 1: blocked at action #0 1B0, waiting for 1F0 (rank 1)"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("rank 2: finished"), std::string::npos) << what;
  }
}

TEST(LowerTest, RejectsActionOnWrongRank) {
  const Program p = MakeProgram(Layout::Loop(2, 1, 1), {"0F0 1F0", "1B0 0B0"});
  EXPECT_THROW(Lower(p), UserError);
}

}  // namespace
}  // namespace conveyor
