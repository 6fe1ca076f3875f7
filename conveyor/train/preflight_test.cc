#include "conveyor/train/preflight.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>

#include "conveyor/common/error.h"
#include "conveyor/common/scratch_folder_testing.h"
#include "conveyor/data/data_testing.h"
#include "conveyor/train/train_testing.h"

namespace conveyor {
namespace {

// The message of the UserError `check` throws for `config`, or "accepted".
std::string ErrorOf(const std::function<void(const TrainConfig&)>& check,
                    const TrainConfig& config) {
  try {
    check(config);
  } catch (const UserError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(PreflightTest, RefusesRunsThatCannotStart) {
  TrainConfig c = TinyGpt();
  EXPECT_EQ(ErrorOf(PreflightCheck, c), "accepted");
  c.pp = 2;
  c.model.layers = 1;  // 3 layers cannot fill 2 ranks x 2 chunks
  c.schedule = "zb-v";
  EXPECT_NE(ErrorOf(PreflightCheck, c), "accepted");
  // The corpus is the files' check (generation runs without one).
  c = TinyGpt();
  c.data = "/nonexistent/corpus";
  EXPECT_EQ(ErrorOf(PreflightCheck, c), "accepted");
  const std::string missing = ErrorOf([](const TrainConfig& t) { PreflightFiles(t); }, c);
  EXPECT_NE(missing.find("corpus '/nonexistent/corpus' does not exist"), std::string::npos)
      << missing;
}

TEST(PreflightTest, FindsBadFilesBeforeAnyRank) {
  TrainConfig c = TinyGpt();
  auto error_of = [](const TrainConfig& config) {
    return ErrorOf([](const TrainConfig& t) { PreflightFiles(t); }, config);
  };
  EXPECT_EQ(error_of(c), "accepted");
  c.metrics = "/nonexistent/dir/m.json";
  EXPECT_NE(
      error_of(c).find(
          "--metrics '/nonexistent/dir/m.json': the folder '/nonexistent/dir' does not exist"),
      std::string::npos)
      << error_of(c);
  c.metrics = ::testing::TempDir();
  EXPECT_NE(error_of(c).find("is a folder"), std::string::npos) << error_of(c);
  c = TinyGpt();
  c.checkpoint_dir = "/proc/nope/ckpt";
  EXPECT_NE(error_of(c).find("--checkpoint-dir '/proc/nope/ckpt': cannot create files in '/proc'"),
            std::string::npos)
      << error_of(c);
  c = TinyGpt();
  c.model.seq_len = 60000;  // longer than the tiny corpus
  EXPECT_NE(error_of(c), "accepted");
  c = TinyGpt();
  c.model.kind = ModelKind::kClassifier;
  c.model.classes = 50;  // the tiny corpus is one file: one category
  EXPECT_NE(error_of(c), "accepted");
}

// `conveyor eval` reads every token of its data: a data set too small for the default split's
// validation part trains nowhere but evaluates.
TEST(PreflightTest, EvaluatingAllOfTheDataAppliesNoSplit) {
  ScratchFolder scratch;
  TrainConfig c = TinyGpt();
  c.data = scratch.Path("small");
  WriteCountingDataSet(c.data, 7);  // 7 documents: 969,30,1 leaves validation none
  const auto check = [](DataUse use) {
    return [use](const TrainConfig& t) { PreflightFiles(t, use); };
  };
  EXPECT_NE(ErrorOf(check(DataUse::kTrain), c).find("the validation split (0 of 7 documents)"),
            std::string::npos)
      << ErrorOf(check(DataUse::kTrain), c);
  EXPECT_EQ(ErrorOf(check(DataUse::kEvaluateAll), c), "accepted");
  // A data set that cannot be opened is refused either way.
  c.data = scratch.Write("bad.bin", "odd");
  EXPECT_NE(ErrorOf(check(DataUse::kEvaluateAll), c).find("bad.bin"), std::string::npos)
      << ErrorOf(check(DataUse::kEvaluateAll), c);
}

// A --resume that names no folder is one line naming it (not a "filesystem error").
TEST(PreflightTest, ResumeMustNameAFolder) {
  ScratchFolder scratch;
  TrainConfig c = TinyGpt();
  const std::string loop = scratch.Path("loop");
  std::filesystem::create_symlink(loop, loop);
  c.resume = loop;
  EXPECT_EQ(ErrorOf([](const TrainConfig& t) { PreflightFiles(t); }, c),
            "--resume " + loop + ": its symbolic links loop (or nest too deep): it names no file");
}

}  // namespace
}  // namespace conveyor
