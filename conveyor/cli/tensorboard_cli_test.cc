// End-to-end tests of `conveyor train --tensorboard DIR`: the event file read back by
// TensorBoard's own readers (testdata/reference/tensorboard_events.py, in the reference
// environment) against the run's --metrics file, a run killed outright, a mesh whose ranks
// make one file, and a folder that cannot be made.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "conveyor/cli/cli_testing.h"
#include "conveyor/common/reference_env_testing.h"

namespace conveyor {
namespace {

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// TensorBoard's view of the event files in `dir` (tensorboard_events.py's JSON); an empty
// object when the script fails (the test has then failed).
nlohmann::json ReadWithTensorBoard(const std::string& dir) {
  const ReferenceRun run =
      RunReferenceScript("tensorboard_events.py", "'" + dir + "' '" + dir + "/../tb.json'");
  EXPECT_TRUE(run.ok()) << run.output;
  if (!run.ok()) return nlohmann::json::object();
  return ReadJson(dir + "/../tb.json");
}

// The steps of `tag`'s points, in order.
std::vector<int64_t> Steps(const nlohmann::json& tb, const std::string& tag) {
  std::vector<int64_t> steps;
  for (const auto& point : tb["scalars"].value(tag, nlohmann::json::array())) {
    steps.push_back(point[0].get<int64_t>());
  }
  return steps;
}

// Every file TensorBoard found was read to its end, its first event the file version.
void ExpectWholeFiles(const nlohmann::json& tb) {
  for (const auto& file : tb["files"]) {
    EXPECT_EQ(file["read_bytes"], file["bytes"]) << file.dump();
    EXPECT_EQ(file["file_version"], "brain.Event:2") << file.dump();
  }
}

// A two-stage pipeline (two rank processes) evaluated every 2 steps: one event file, rank 0's,
// whose every step's loss and learning rate are those of --metrics (as 32-bit floats, the
// type of a TensorBoard scalar), an eval loss at each evaluation, and the end of the run's
// bubble and memory.
TEST(TensorBoardCliTest, ScalarsAreTheMetricsAsTensorBoardReadsThem) {
  CONVEYOR_SKIP_WITHOUT_REFERENCE_ENV();
  const std::string dir = ScratchWithCorpus("tensorboard");
  const Result r = Conveyor(
      "train --pp 2 --schedule 1f1b --layers 2 --hidden 16 --heads 2 --seq-len 16 "
      "--batch-size 4 --microbatches 2 --steps 5 --eval-every 2 --sample-tokens 0 --data " +
      dir + "/corpus.txt --metrics " + dir + "/m.json --tensorboard " + dir + "/runs/tb");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir + "/runs/tb")) {
    EXPECT_EQ(entry.path().filename().string().rfind("events.out.tfevents.", 0), 0u)
        << entry.path();
    ++files;
  }
  EXPECT_EQ(files, 1);  // rank 0's alone

  const nlohmann::json tb = ReadWithTensorBoard(dir + "/runs/tb");
  ASSERT_EQ(tb["files"].size(), 1u) << tb.dump();
  ExpectWholeFiles(tb);
  const nlohmann::json metrics = ReadJson(dir + "/m.json");
  ASSERT_EQ(metrics["steps"].size(), 5u);
  for (const char* tag : {"train/loss", "train/lr"}) {
    const std::string key = std::string(tag).substr(6);  // "loss", "lr"
    const auto& points = tb["scalars"][tag];
    ASSERT_EQ(points.size(), 5u) << tag;
    for (size_t i = 0; i < 5; ++i) {
      const auto& row = metrics["steps"][i];
      EXPECT_EQ(points[i][0], row["step"]) << tag;
      EXPECT_EQ(points[i][1].get<float>(), row[key].get<float>())
          << tag << " at step " << row["step"];
    }
  }
  // Evaluations at steps 2 and 4 and the final one at 5.
  const auto& evals = metrics["evals"];
  ASSERT_EQ(evals.size(), 3u);
  EXPECT_EQ(Steps(tb, "eval/loss"), (std::vector<int64_t>{2, 4, 5}));
  for (size_t i = 0; i < evals.size() && i < tb["scalars"]["eval/loss"].size(); ++i) {
    EXPECT_EQ(tb["scalars"]["eval/loss"][i][1].get<float>(), evals[i]["loss"].get<float>());
  }
  EXPECT_EQ(Steps(tb, "train/grad_norm").size(), 5u);
  EXPECT_EQ(Steps(tb, "train/tokens_per_s").size(), 5u);
  for (const char* tag : {"pipeline/bubble_measured", "pipeline/bubble_predicted",
                          "pipeline/step_s_measured", "memory/peak_tensor_mib_max",
                          "memory/rank_0/peak_tensor_mib", "memory/rank_1/peak_tensor_mib"}) {
    EXPECT_EQ(Steps(tb, tag), (std::vector<int64_t>{5})) << tag;
  }
  EXPECT_EQ(tb["scalars"]["pipeline/bubble_measured"][0][1].get<float>(),
            metrics["measured_bubble_fraction"].get<float>());
  EXPECT_GT(tb["scalars"]["memory/peak_tensor_mib_max"][0][1].get<double>(), 0);
  EXPECT_FALSE(tb["scalars"].contains("train/skipped"));
}

// A run killed with SIGKILL mid-training leaves a file TensorBoard reads to its end: the steps
// up to the kill, each whole, and none of the end of the run's scalars. The two ranks run as
// threads of the one process killed (rank processes would each be a process group of its own).
TEST(TensorBoardCliTest, AKilledRunLeavesAFileReadUpToItsLastStep) {
  CONVEYOR_SKIP_WITHOUT_REFERENCE_ENV();
  const std::string dir = ScratchWithCorpus("tensorboard_killed");
  // Killed once its event file holds about 20 steps (some 150 bytes each), or after 120 s.
  const Result r = Shell("cd " + dir +
                         " && (" CONVEYOR_BINARY
                         " train --pp 2 --rank-threads --schedule 1f1b --layers 2 --hidden 16 "
                         "--heads 2 --seq-len 16 --batch-size 4 --microbatches 2 --steps 1000000 "
                         "--eval-every 0 --sample-tokens 0 --data corpus.txt --tensorboard tb "
                         ">out.txt 2>&1 & pid=$!; "
                         "for i in $(seq 1200); do "
                         "  f=$(ls tb/events.out.tfevents.* 2>/dev/null | head -n 1); "
                         "  if [ -n \"$f\" ] && [ $(stat -c %s \"$f\") -gt 3000 ]; then break; fi; "
                         "  sleep 0.1; "
                         "done; kill -9 $pid; wait $pid; echo \"exit $?\")");
  EXPECT_EQ(r.out, "exit 137\n") << r.err;  // 128 + SIGKILL: it was still running

  const nlohmann::json tb = ReadWithTensorBoard(dir + "/tb");
  ASSERT_EQ(tb["files"].size(), 1u) << tb.dump();
  ExpectWholeFiles(tb);
  const std::vector<int64_t> steps = Steps(tb, "train/loss");
  ASSERT_GE(steps.size(), 10u) << tb.dump();
  for (size_t i = 0; i < steps.size(); ++i) EXPECT_EQ(steps[i], static_cast<int64_t>(i) + 1);
  EXPECT_EQ(Steps(tb, "train/lr"), steps);
  EXPECT_FALSE(tb["scalars"].contains("pipeline/bubble_measured"));
}

// A Mixture-of-Experts model over dp 2 x pp 2 (four rank processes), the folder given by the
// TOML file's `tensorboard`: one event file, with each MoE block's expert load every step,
// and the router's auxiliary loss.
TEST(TensorBoardCliTest, MixtureOfExpertsOnAMeshWritesExpertLoadInOneFile) {
  CONVEYOR_SKIP_WITHOUT_REFERENCE_ENV();
  const std::string dir = ScratchWithCorpus("tensorboard_moe");
  std::ofstream(dir + "/run.toml") << "tensorboard = \"" << dir << "/tb\"\n";
  const Result r = Conveyor(
      "train " + dir +
      "/run.toml --model llama --layers 2 --hidden 16 --heads 2 --seq-len 16 --batch-size 8 "
      "--experts 4 --top-k 2 --expert-units 16 --router-aux-loss-coef 0.01 --eval-every 0 "
      "--sample-tokens 0 --steps 3 --microbatches 2 --dp 2 --pp 2 --schedule 1f1b --data " +
      dir + "/corpus.txt");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const nlohmann::json tb = ReadWithTensorBoard(dir + "/tb");
  ASSERT_EQ(tb["files"].size(), 1u) << tb.dump();
  ExpectWholeFiles(tb);
  const std::vector<int64_t> three = {1, 2, 3};
  EXPECT_EQ(Steps(tb, "moe/imbalance_max"), three);
  std::set<std::string> blocks;
  for (const auto& [tag, points] : tb["scalars"].items()) {
    const std::string suffix = "/imbalance";
    if (tag.rfind("moe/", 0) == 0 && tag.size() > suffix.size() &&
        tag.compare(tag.size() - suffix.size(), suffix.size(), suffix) == 0) {
      blocks.insert(tag);
      EXPECT_EQ(Steps(tb, tag), three) << tag;
      for (const auto& point : points) EXPECT_GE(point[1].get<double>(), 1.0) << tag;
    }
  }
  EXPECT_EQ(blocks.size(), 2u) << tb["scalars"].dump();  // both layers' experts
  EXPECT_EQ(Steps(tb, "train/aux/load_balance"), three) << tb["scalars"].dump();
  EXPECT_EQ(Steps(tb, "dp/comm_s"), three);
  EXPECT_EQ(Steps(tb, "memory/rank_3/peak_tensor_mib"), (std::vector<int64_t>{3}));
}

// A folder that cannot be made is refused before any rank starts, naming the flag and path.
TEST(TensorBoardCliTest, AFolderThatCannotBeMadeIsRefusedAtOnce) {
  const std::string dir = ScratchWithCorpus("tensorboard_refused");
  std::ofstream(dir + "/file") << "not a folder";
  const Result r =
      Conveyor("train --pp 1 --layers 1 --hidden 16 --heads 2 --seq-len 16 --steps 1 --data " +
               dir + "/corpus.txt --tensorboard " + dir + "/file/tb");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--tensorboard"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(dir + "/file/tb"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("step 1"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace conveyor
