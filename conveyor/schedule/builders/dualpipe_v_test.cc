#include "conveyor/schedule/builders/dualpipe_v.h"

#include <gtest/gtest.h>

#include "conveyor/schedule/builders/builder_testing.h"
#include "conveyor/schedule/builders/zb_testing.h"
#include "conveyor/schedule/program_csv.h"

namespace conveyor {
namespace {

TEST(DualPipeVTest, SoundForEveryShape) {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 3 * p + 1; ++m) {
      const Program program = BuildDualPipeV({.pp = p, .microbatches = m});
      ASSERT_EQ(program.layout.placement(), Placement::kV);
      ExpectSoundZbProgram(program, 2 * p + 1,
                           "p=" + std::to_string(p) + " m=" + std::to_string(m));
    }
  }
}

TEST(DualPipeVTest, OverlapsForwardAndBackwardInTheMainPhase) {
  const Program program = BuildDualPipeV({.pp = 4, .microbatches = 10});
  int overlapped = 0;
  for (const Action& a : program.ranks[0]) overlapped += a.op == Op::kOverlapFB;
  // Rank 0: 2(m - 2p + 1) pairs in the main phase, p - 1 more in the next.
  EXPECT_EQ(overlapped, 2 * (10 - 8 + 1) + 3);
}

TEST(DualPipeVTest, ReproducesPyTorchsProgram) {
  const std::string path =
      std::string(CONVEYOR_TESTDATA_DIR) + "/pytorch-schedules/dualpipev_4rank_10mb.csv";
  const Program reference = LoadProgramCsv(path).program;
  const Program built = BuildDualPipeV({.pp = 4, .microbatches = 10});
  for (int r = 0; r < 4; ++r) EXPECT_EQ(built.ranks[r], reference.ranks[r]) << "rank " << r;
}

TEST(DualPipeVTest, Preconditions) {
  ExpectRejected(BuildDualPipeV, {.pp = 0, .microbatches = 4}, "pp = 0");
  ExpectRejected(BuildDualPipeV, {.pp = 2, .microbatches = 0}, "microbatches = 0");
  ExpectRejected(BuildDualPipeV, {.pp = 2, .microbatches = 4, .chunks = 4}, "chunks = 4");
  ExpectRejected(BuildDualPipeV, {.pp = 2, .microbatches = 4, .chunks = 1}, "dualpipe-v");
}

}  // namespace
}  // namespace conveyor
