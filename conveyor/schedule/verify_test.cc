#include "conveyor/schedule/verify.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>

#include "conveyor/common/error.h"
#include "conveyor/schedule/lower.h"
#include "conveyor/schedule/program_testing.h"
#include "conveyor/schedule/registry.h"

namespace conveyor {
namespace {

const std::vector<std::string> kGpipe = {"0F0 0F1 0B0 0B1", "1F0 1F1 1B0 1B1"};

// The kinds found, in order.
std::vector<FindingKind> Kinds(const Program& p, const VerifyOptions& options = {}) {
  std::vector<FindingKind> kinds;
  for (const Finding& f : Verify(p, options)) kinds.push_back(f.kind);
  return kinds;
}

bool Has(const std::vector<Finding>& findings, FindingKind kind, const std::string& text) {
  for (const Finding& f : findings) {
    if (f.kind == kind && f.message.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(VerifyTest, CleanProgramsHaveNoFindings) {
  const Program p = MakeProgram(Layout::Loop(2, 1, 2), kGpipe);
  EXPECT_TRUE(Verify(p).empty());
  EXPECT_TRUE(Verify(Lower(p)).empty());
  EXPECT_NO_THROW(
      VerifyOrThrow(MakeProgram(Layout::Loop(2, 1, 1), {"0F0 0I0 0W0", "1F0 1I0 1W0"})));
}

TEST(VerifyTest, MissingAndDuplicate) {
  const Program p = MakeProgram(Layout::Loop(2, 1, 2), {"0F0 0F1 0B0 0B1 0B1", "1F0 1B0 1B1"});
  const auto findings = Verify(p);
  EXPECT_TRUE(Has(findings, FindingKind::kMissing, "stage 1 micro-batch 1 has no forward"))
      << FormatFindings(findings);
  EXPECT_TRUE(Has(findings, FindingKind::kDuplicate, "stage 0 micro-batch 1 has 2 full backward"))
      << FormatFindings(findings);
}

TEST(VerifyTest, MissingSplitHalfAndMixedBackward) {
  const Program p = MakeProgram(Layout::Loop(1, 1, 2), {"0F0 0I0 0F1 0B1 0W1"});
  const auto findings = Verify(p);
  EXPECT_TRUE(
      Has(findings, FindingKind::kMissing, "stage 0 micro-batch 0 has no backward for weights"))
      << FormatFindings(findings);
  EXPECT_TRUE(Has(findings, FindingKind::kMixedBackward, "stage 0 micro-batch 1"))
      << FormatFindings(findings);
}

TEST(VerifyTest, WrongOrderOnARank) {
  const Program p = MakeProgram(Layout::Loop(1, 1, 2), {"0I0 0F0 0W0 0F1 0W1 0I1"});
  const auto findings = Verify(p);
  EXPECT_TRUE(Has(findings, FindingKind::kWrongOrder, "backward of stage 0 micro-batch 0 (#0)"))
      << FormatFindings(findings);
  EXPECT_TRUE(Has(findings, FindingKind::kWrongOrder, "W of stage 0 micro-batch 1 (#4)"))
      << FormatFindings(findings);
}

TEST(VerifyTest, BrokenDependencyAcrossRanks) {
  const Program p = MakeProgram(Layout::Loop(2, 1, 2), {"0F0 0B0 0F1 0B1", "1F1 1B1 1F0 1B0"});
  // Rank 1 wants micro-batch 1 first, rank 0 only sends it after finishing micro-batch 0.
  const auto findings = Verify(p);
  ASSERT_EQ(findings.size(), 2u) << FormatFindings(findings);
  EXPECT_TRUE(Has(findings, FindingKind::kBrokenDependency, "rank 0 action #1 0B0 can never run"));
  EXPECT_TRUE(Has(findings, FindingKind::kBrokenDependency, "rank 1 action #0 1F1"));
}

TEST(VerifyTest, StageOnTwoRanksAndWrongRank) {
  const Program p = MakeProgram(Layout::Loop(2, 1, 1), {"0F0 1F0 1B0 0B0", "1F0 1B0"});
  const auto findings = Verify(p);
  EXPECT_TRUE(Has(findings, FindingKind::kWrongRank, "stage 1 is placed on rank 1"))
      << FormatFindings(findings);
  EXPECT_TRUE(
      Has(findings, FindingKind::kStageOnTwoRanks, "stage 1 has actions on rank 0 and rank 1"))
      << FormatFindings(findings);
}

TEST(VerifyTest, BadActionIndices) {
  const Program p = MakeProgram(Layout::Loop(2, 1, 1), {"0F0 0B0 4F0", "1F0 1B0 1F3"});
  const auto findings = Verify(p);
  EXPECT_TRUE(Has(findings, FindingKind::kBadAction, "stage 4 outside [0, 2)"));
  EXPECT_TRUE(
      Has(findings, FindingKind::kBadAction, "micro-batch 3 does not flow through stage 1"));
}

TEST(VerifyTest, UnmatchedComms) {
  Program lowered = Lower(MakeProgram(Layout::Loop(2, 1, 2), kGpipe));
  // Drop rank 1's first receive; add a send that goes nowhere.
  ASSERT_EQ(lowered.ranks[1][0].ToString(), "1RECV_F0");
  lowered.ranks[1].erase(lowered.ranks[1].begin());
  lowered.ranks[0].push_back(ParseAction("0SEND_B0"));
  const auto findings = Verify(lowered);
  EXPECT_TRUE(Has(findings, FindingKind::kUnmatchedComm, "rank 1 lacks 1RECV_F0"))
      << FormatFindings(findings);
  EXPECT_TRUE(Has(findings, FindingKind::kUnmatchedComm, "0SEND_B0: no neighbouring stage"))
      << FormatFindings(findings);
}

TEST(VerifyTest, CommsOutOfPlaceAndBetweenStagesOfOneRank) {
  Program lowered = Lower(MakeProgram(Layout::Loop(2, 1, 1), {"0F0 0B0", "1F0 1B0"}));
  // rank 0: 0F0 0SEND_F0 0RECV_B0 0B0 -> move the send before its producer.
  std::swap(lowered.ranks[0][0], lowered.ranks[0][1]);
  auto findings = Verify(lowered);
  EXPECT_TRUE(
      Has(findings, FindingKind::kUnmatchedComm, "comes before the compute that produces it"))
      << FormatFindings(findings);

  Program v = Lower(MakeProgram(Layout::V(1, 1), {"0F0 1F0 1B0 0B0"}));
  v.ranks[0].insert(v.ranks[0].begin() + 1, ParseAction("0SEND_F0"));
  findings = Verify(v);
  EXPECT_TRUE(Has(findings, FindingKind::kUnmatchedComm, "both stages live on this rank"))
      << FormatFindings(findings);
}

// NCCL matches the messages between two ranks by order: the receiver must post its receives
// in the order the sender posts the sends.
TEST(VerifyTest, ReceivesInAnotherOrderThanTheSends) {
  Program lowered = Lower(MakeProgram(Layout::Loop(2, 1, 2), kGpipe));
  // rank 1 posts 1RECV_F0 then 1RECV_F1 (rank 0 sends F0 then F1): swap them.
  auto& rank1 = lowered.ranks[1];
  const auto f0 = std::find(rank1.begin(), rank1.end(), ParseAction("1RECV_F0"));
  const auto f1 = std::find(rank1.begin(), rank1.end(), ParseAction("1RECV_F1"));
  ASSERT_TRUE(f0 < f1);
  std::iter_swap(f0, f1);
  const auto findings = Verify(lowered);
  EXPECT_TRUE(Has(findings, FindingKind::kCommOrder,
                  "1RECV_F1 is its receive #0 from rank 0, but rank 0's send #0 to it"))
      << FormatFindings(findings);
}

// Lower() creates each SEND and its RECV together, appended to both ranks' lists, so every
// lowered schedule posts the messages of each pair of ranks in one order on both sides.
TEST(VerifyTest, EveryLoweredScheduleHasOneMessageOrderPerPairOfRanks) {
  for (const ScheduleInfo& info : AllSchedules()) {
    int verified = 0;
    for (const int p : {2, 4}) {
      for (const int m : {4, 8}) {
        std::optional<Program> program;
        try {
          program = BuildSchedule(info.name, ScheduleOptions{p, m, 0});
        } catch (const UserError&) {
          continue;  // a precondition this shape misses (m a multiple of p, ...)
        }
        const auto findings = Verify(WithGradReductions(Lower(*program)));
        EXPECT_TRUE(findings.empty()) << info.name << " p " << p << " m " << m << "\n"
                                      << FormatFindings(findings);
        ++verified;
      }
    }
    // Not vacuous: every schedule takes at least one of these shapes.
    EXPECT_GE(verified, 1) << info.name << " refused every shape";
  }
}

TEST(VerifyTest, MemoryBound) {
  const Program p = MakeProgram(Layout::Loop(2, 1, 2), kGpipe);
  EXPECT_EQ(Kinds(p, {.max_in_flight = 1}),
            (std::vector<FindingKind>{FindingKind::kMemoryBound, FindingKind::kMemoryBound}));
  EXPECT_TRUE(Kinds(p, {.max_in_flight = 2}).empty());
}

TEST(VerifyTest, VerifyOrThrowListsAllFindings) {
  const Program p = MakeProgram(Layout::Loop(2, 1, 1), {"0F0", "1F0"});
  try {
    VerifyOrThrow(p);
    FAIL();
  } catch (const UserError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("2 problem(s)"), std::string::npos) << what;
    EXPECT_NE(what.find("[missing] stage 0"), std::string::npos) << what;
    EXPECT_NE(what.find("[missing] stage 1"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace conveyor
