#include "conveyor/schedule/program_csv.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "conveyor/common/error.h"
#include "conveyor/schedule/lower.h"
#include "conveyor/schedule/program_testing.h"
#include "conveyor/schedule/verify.h"

namespace conveyor {
namespace {

// The UserError message `fn` throws, or "" when it does not throw.
template <typename Fn>
std::string ErrorOf(Fn&& fn) {
  try {
    fn();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

void ExpectSameProgram(const Program& a, const Program& b) {
  EXPECT_EQ(a.ToText(), b.ToText());
  EXPECT_EQ(a.layout.stage_to_rank(), b.layout.stage_to_rank());
  EXPECT_EQ(a.layout.num_microbatches(), b.layout.num_microbatches());
  EXPECT_EQ(a.layout.directions(), b.layout.directions());
  EXPECT_EQ(a.layout.placement(), b.layout.placement());
}

void ExpectRoundTrip(const Program& program) {
  const std::string csv = ProgramToCsv(program);
  const LoadedProgram loaded = ReadProgramCsv(csv);
  ExpectSameProgram(loaded.program, program);
  EXPECT_EQ(loaded.naming, Naming::kCurrent);
  EXPECT_EQ(ProgramToCsv(loaded.program), csv);
}

// 1F1B on 2 ranks, 3 micro-batches, split backward on stage 0.
Program OneFOneB() {
  return MakeProgram(Layout::Loop(2, 1, 3),
                     {"0F0 0F1 0I0 0W0 0F2 0I1 0W1 0I2 0W2", "1F0 1B0 1F1 1B1 1F2 1B2"});
}

// V placement, 2 ranks (stages 0,3 on rank 0 and 1,2 on rank 1), 2 micro-batches, with an
// overlapped unit.
Program VProgram() {
  return MakeProgram(Layout::V(2, 2), {"0F0 0F1 3F0 3B0 (3F1;0B0)OVERLAP_F_B 3B1 0B1",
                                       "1F0 1F1 2F0 2F1 2B0 1B0 2B1 1B1"});
}

TEST(ProgramCsvTest, WritesOneLinePerRank) {
  EXPECT_EQ(ProgramToCsv(VProgram()),
            "0F0,0F1,3F0,3B0,(3F1;0B0)OVERLAP_F_B,3B1,0B1\n"
            "1F0,1F1,2F0,2F1,2B0,1B0,2B1,1B1\n");
}

TEST(ProgramCsvTest, RoundTripComputeOnly) {
  ExpectRoundTrip(OneFOneB());
  ExpectRoundTrip(VProgram());
}

TEST(ProgramCsvTest, RoundTripLowered) {
  const Program lowered = Lower(OneFOneB());
  ASSERT_TRUE(lowered.has_comms());
  ExpectRoundTrip(lowered);
  ExpectRoundTrip(Lower(VProgram()));
}

TEST(ProgramCsvTest, RoundTripThroughFile) {
  const std::string path =
      ::testing::TempDir() + "/conveyor_program_csv_test." + std::to_string(::getpid()) + ".csv";
  WriteProgramCsv(Lower(VProgram()), path);
  ExpectSameProgram(LoadProgramCsv(path).program, Lower(VProgram()));
  std::filesystem::remove(path);
}

TEST(ProgramCsvTest, InfersLoopAndInterleavedPlacement) {
  const Layout loop = ReadProgramCsv("0F0,0B0\n1F0,1B0\n").program.layout;
  EXPECT_EQ(loop.placement(), Placement::kLoop);
  EXPECT_EQ(loop.num_stages(), 2);
  const Layout interleaved = ReadProgramCsv("0F0,2F0,2B0,0B0\n1F0,3F0,3B0,1B0\n").program.layout;
  EXPECT_EQ(interleaved.placement(), Placement::kLoop);
  EXPECT_EQ(interleaved.chunks_per_rank(), 2);
  EXPECT_EQ(interleaved.num_microbatches(), 1);
}

TEST(ProgramCsvTest, InfersCustomPlacement) {
  const Layout custom = ReadProgramCsv("1F0,1B0\n0F0,0B0\n").program.layout;
  EXPECT_EQ(custom.placement(), Placement::kCustom);
  EXPECT_EQ(custom.stage_to_rank(), (std::vector<int>{1, 0}));
}

TEST(ProgramCsvTest, InfersTwoDirections) {
  // DualPipe on 2 ranks, 4 micro-batches: stages 0,1 carry 0,1; stages 2,3 carry 2,3.
  const Program dual = MakeProgram(
      Layout::Dual(2, 4), {"0F0 0F1 3F2 3F3 3B2 3B3 0B0 0B1", "1F0 2F2 1F1 2F3 1B0 2B2 1B1 2B3"});
  const LoadedProgram loaded = ReadProgramCsv(ProgramToCsv(dual));
  EXPECT_EQ(loaded.program.layout.placement(), Placement::kDual);
  EXPECT_EQ(loaded.program.layout.directions(), 2);
  EXPECT_TRUE(Verify(loaded.program).empty()) << FormatFindings(Verify(loaded.program));
  ExpectRoundTrip(dual);
}

TEST(ProgramCsvTest, AcceptsIdleCellsAndWhitespace) {
  const LoadedProgram loaded = ReadProgramCsv("0F0,,0B0\r\n, 1F0 ,1B0,\n\n");
  EXPECT_EQ(loaded.program.ToText(), "rank 0: 0F0 0B0\nrank 1: 1F0 1B0\n");
}

TEST(ProgramCsvTest, DetectsLegacyNamingFromBW) {
  const LoadedProgram loaded = ReadProgramCsv("0F0,0BW0\n1F0,1B0,1W0\n");
  EXPECT_EQ(loaded.naming, Naming::kLegacy);
  EXPECT_EQ(loaded.program.ToText(), "rank 0: 0F0 0B0\nrank 1: 1F0 1I0 1W0\n");
  ASSERT_FALSE(loaded.notes.empty());
  EXPECT_NE(loaded.notes[0].find("'BW' appears (rank 0, column 2: '0BW0')"), std::string::npos)
      << loaded.notes[0];
}

TEST(ProgramCsvTest, DetectsLegacyNamingFromBAndW) {
  // Every stage runs both micro-batches (a reader requirement since issue 10).
  const LoadedProgram loaded =
      ReadProgramCsv("0F0,0B0,0W0,0F1,0B1\n1F0,(1F1;1B0)OVERLAP_F_B,1W0,1B1\n");
  EXPECT_EQ(loaded.naming, Naming::kLegacy);
  EXPECT_EQ(loaded.program.ToText(),
            "rank 0: 0F0 0I0 0W0 0F1 0B1\nrank 1: 1F0 (1F1;1I0)OVERLAP_F_B 1W0 1B1\n");
  ASSERT_EQ(loaded.notes.size(), 2u);
  EXPECT_NE(loaded.notes[0].find("B and W both appear"), std::string::npos) << loaded.notes[0];
  EXPECT_NE(loaded.notes[1].find("2 legacy B action(s) without a W"), std::string::npos)
      << loaded.notes[1];
}

TEST(ProgramCsvTest, CurrentNamingByDefault) {
  const LoadedProgram loaded = ReadProgramCsv("0F0,0I0,0W0\n1F0,1B0\n");
  EXPECT_EQ(loaded.naming, Naming::kCurrent);
  EXPECT_EQ(loaded.program.ToText(), "rank 0: 0F0 0I0 0W0\nrank 1: 1F0 1B0\n");
  ASSERT_EQ(loaded.notes.size(), 1u);
  EXPECT_NE(loaded.notes[0].find("current naming assumed"), std::string::npos);
}

TEST(ProgramCsvTest, NamingOverride) {
  CsvReadOptions legacy;
  legacy.naming = Naming::kLegacy;
  EXPECT_EQ(ReadProgramCsv("0F0,0B0,0W0\n", legacy).program.ToText(), "rank 0: 0F0 0I0 0W0\n");
  CsvReadOptions current;
  current.naming = Naming::kCurrent;
  // Wrong under the current naming (B and W for one micro-batch), but read as asked.
  EXPECT_EQ(ReadProgramCsv("0F0,0B0,0W0\n", current).program.ToText(), "rank 0: 0F0 0B0 0W0\n");
  EXPECT_NE(ErrorOf([&] {
              ReadProgramCsv("0F0,0BW0\n", current);
            }).find("rank 0, column 2: '0BW0': 'BW' is the legacy naming"),
            std::string::npos);
}

TEST(ProgramCsvTest, ParsesNamingChoice) {
  EXPECT_FALSE(ParseNamingChoice("auto").naming.has_value());
  EXPECT_EQ(ParseNamingChoice("current").naming, Naming::kCurrent);
  EXPECT_EQ(ParseNamingChoice("legacy").naming, Naming::kLegacy);
  EXPECT_NE(ErrorOf([] { ParseNamingChoice("old"); }).find("unknown CSV naming 'old'"),
            std::string::npos);
}

TEST(ProgramCsvTest, ErrorsNameTheProblem) {
  EXPECT_NE(ErrorOf([] { ReadProgramCsv(""); }).find("schedule CSV is empty"), std::string::npos);
  EXPECT_NE(ErrorOf([] { ReadProgramCsv(" \n\n"); }).find("schedule CSV is empty"),
            std::string::npos);
  const std::string bad_cell = ErrorOf([] { ReadProgramCsv("0F0,0B0\n1F0,,1X0\n"); });
  EXPECT_NE(bad_cell.find("rank 1, column 3: cannot parse '1X0'"), std::string::npos) << bad_cell;
  const std::string two_ranks = ErrorOf([] { ReadProgramCsv("0F0,1F0\n1B0,0B0\n"); });
  EXPECT_NE(two_ranks.find("stage 1 on two ranks: rank 0 (rank 0, column 2: '1F0') and rank 1 "
                           "(rank 1, column 1: '1B0')"),
            std::string::npos)
      << two_ranks;
  EXPECT_NE(
      ErrorOf([] { ReadProgramCsv("0F0,0B0\n,,\n1F0\n"); }).find("rank 1 (line 2) has no actions"),
      std::string::npos);
  EXPECT_NE(ErrorOf([] { ReadProgramCsv("0F0,0B0\n2F0,2B0\n"); }).find("never mentions stage 1"),
            std::string::npos);
  const std::string missing_file = ErrorOf([] { LoadProgramCsv("/nonexistent/x.csv"); });
  EXPECT_NE(missing_file.find("cannot read the schedule CSV '/nonexistent/x.csv'"),
            std::string::npos)
      << missing_file;
}

// A one-cell typo ("1F1" -> "1F1000001") once made the reader infer a million
// micro-batches and the planner simulate them for minutes.
TEST(ProgramCsvTest, RefusesAMicroBatchOnlySomeStagesRun) {
  const std::string csv = ProgramToCsv(OneFOneB());  // 0F0 ... on rank 0, 1F0 1B0 1F1 ...
  std::string typo = csv;
  typo.replace(typo.find("1F1"), 3, "1F1000001");
  const std::string huge = ErrorOf([&] { ReadProgramCsv(typo); });
  EXPECT_NE(huge.find("must be within [1, 65536], got 1000002"), std::string::npos) << huge;
  EXPECT_NE(huge.find("rank 1, column 3: '1F1000001'"), std::string::npos) << huge;

  typo = csv;
  typo.replace(typo.find("1F1"), 3, "1F7");
  const std::string partial = ErrorOf([&] { ReadProgramCsv(typo); });
  EXPECT_NE(partial.find("runs micro-batch 7 on stage 1 (rank 1, column 3: '1F7') but never on "
                         "stage 0"),
            std::string::npos)
      << partial;

  // Every stage runs 0, 1 and 3, none runs 2.
  const std::string gap = ErrorOf([] { ReadProgramCsv("0F0,0F1,0F3,0B0,0B1,0B3\n"); });
  EXPECT_NE(gap.find("never mentions micro-batch 2 although its largest is 3"), std::string::npos)
      << gap;
}

TEST(ProgramCsvTest, RefusesHugeStageNumbersBeforeSizingAnything) {
  const std::string error = ErrorOf([] { ReadProgramCsv("0F0,0B0\n999999999F0,999999999B0\n"); });
  EXPECT_NE(error.find("stages (largest stage number + 1) must be within [1, 262144], got "
                       "1000000000"),
            std::string::npos)
      << error;
}

TEST(ProgramCsvTest, FileErrorsNameThePath) {
  const std::string path =
      ::testing::TempDir() + "/conveyor_program_csv_bad." + std::to_string(::getpid()) + ".csv";
  std::ofstream(path) << "0F0,0Q0\n";
  const std::string error = ErrorOf([&] { LoadProgramCsv(path); });
  EXPECT_EQ(error.rfind(path + ": schedule CSV rank 0, column 2: cannot parse '0Q0'", 0), 0u)
      << error;
  std::filesystem::remove(path);
  EXPECT_NE(ErrorOf([] {
              WriteProgramCsv(OneFOneB(), "/nonexistent/dir/x.csv");
            }).find("cannot open '/nonexistent/dir/x.csv'"),
            std::string::npos);
}

// The schedules PyTorch wrote (testdata/pytorch-schedules).
class PytorchSchedulesTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = std::string(CONVEYOR_TESTDATA_DIR) + "/pytorch-schedules"; }
  LoadedProgram Load(const std::string& name) { return LoadProgramCsv(dir_ + "/" + name); }

  std::string dir_;
};

TEST_F(PytorchSchedulesTest, DualPipeV) {
  const LoadedProgram loaded = Load("dualpipev_4rank_10mb.csv");
  const Layout& layout = loaded.program.layout;
  EXPECT_EQ(loaded.naming, Naming::kCurrent);
  EXPECT_EQ(layout.placement(), Placement::kV);
  EXPECT_EQ(layout.num_ranks(), 4);
  EXPECT_EQ(layout.num_stages(), 8);
  EXPECT_EQ(layout.num_microbatches(), 10);
  EXPECT_EQ(layout.directions(), 1);
  EXPECT_TRUE(Verify(loaded.program).empty()) << FormatFindings(Verify(loaded.program));
}

TEST_F(PytorchSchedulesTest, InterleavedZeroBubbleComputeOnly) {
  const LoadedProgram loaded = Load("zb1p_2rank_2stagep_compute.csv");
  const Layout& layout = loaded.program.layout;
  EXPECT_EQ(loaded.naming, Naming::kLegacy);
  EXPECT_NE(loaded.notes[0].find("B and W both appear"), std::string::npos);
  EXPECT_EQ(layout.placement(), Placement::kLoop);
  EXPECT_EQ(layout.num_ranks(), 2);
  EXPECT_EQ(layout.chunks_per_rank(), 2);
  EXPECT_EQ(layout.num_microbatches(), 8);
  EXPECT_FALSE(loaded.program.has_comms());
  EXPECT_EQ(loaded.program.size(), 2u * 2 * 8 * 3);  // ranks * stages * mbs * {F, I, W}
  EXPECT_TRUE(Verify(loaded.program).empty()) << FormatFindings(Verify(loaded.program));
}

TEST_F(PytorchSchedulesTest, InterleavedZeroBubbleWithComms) {
  const LoadedProgram loaded = Load("zb1p_2rank_2stagep_comms.csv");
  EXPECT_EQ(loaded.naming, Naming::kLegacy);
  EXPECT_NE(loaded.notes[0].find("'BW' appears"), std::string::npos);
  EXPECT_TRUE(loaded.program.has_comms());
  EXPECT_EQ(loaded.program.layout.placement(), Placement::kLoop);
  EXPECT_TRUE(Verify(loaded.program).empty()) << FormatFindings(Verify(loaded.program));
}

TEST_F(PytorchSchedulesTest, ReloadIdentically) {
  for (const char* name : {"dualpipev_4rank_10mb.csv", "zb1p_2rank_2stagep_compute.csv",
                           "zb1p_2rank_2stagep_comms.csv"}) {
    SCOPED_TRACE(name);
    const Program program = Load(name).program;
    const LoadedProgram reloaded = ReadProgramCsv(ProgramToCsv(program));
    EXPECT_EQ(reloaded.naming, Naming::kCurrent);
    ExpectSameProgram(reloaded.program, program);
  }
}

}  // namespace
}  // namespace conveyor
