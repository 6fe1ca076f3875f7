// The central runtime test across real processes over Gloo on 127.0.0.1: each rank is this
// test binary relaunched by conveyor's launcher to run a worker (launch/worker_testing.h);
// every rank writes its loss and gradients, and the parent checks their sums against one
// full-batch step in a single process. Also: a rank that throws or dies mid-step stops the
// run with an error naming it.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "conveyor/comm/c10d_transport.h"
#include "conveyor/common/env.h"
#include "conveyor/common/scratch_folder_testing.h"
#include "conveyor/e2e/pipeline_testing.h"
#include "conveyor/formats/safetensors.h"
#include "conveyor/launch/launcher.h"
#include "conveyor/launch/rendezvous.h"
#include "conveyor/launch/worker_testing.h"
#include "conveyor/runtime/synthetic_stage.h"
#include "conveyor/schedule/lower.h"
#include "conveyor/schedule/registry.h"

namespace conveyor {
namespace {

constexpr uint64_t kSeed = 11;

// The loss (a 0-d double under "loss") and every gradient, by name, as safetensors.
void WriteOutcome(const std::string& path, const StepOutcome& outcome) {
  std::map<std::string, at::Tensor> tensors = outcome.grads;
  tensors["loss"] = at::scalar_tensor(outcome.loss, at::kDouble);
  SaveSafetensors(path, tensors);
}

// Adds a rank's file into `sum`.
void AddOutcome(const std::string& path, StepOutcome& sum) {
  SafetensorsFile file = LoadSafetensors(path);
  for (auto& [name, tensor] : file.tensors) {
    if (name == "loss") {
      sum.loss += tensor.item<double>();
      continue;
    }
    auto it = sum.grads.find(name);
    if (it == sum.grads.end()) {
      sum.grads[name] = tensor;
    } else {
      it->second += tensor;
    }
  }
}

std::unique_ptr<Transport> ConnectFromEnvironment() {
  C10dOptions options;
  options.transport.timeout = std::chrono::seconds(30);
  return ConnectC10d(RendezvousFromEnvironment(), options);
}

// One step of every schedule that takes (pp, m), results into CONVEYOR_TEST_DIR.
CONVEYOR_WORKER(PipelineEquivalence) {
  const char* dir = std::getenv("CONVEYOR_TEST_DIR");
  ASSERT_NE(dir, nullptr) << "CONVEYOR_TEST_DIR not set";
  const int pp = static_cast<int>(EnvInt("CONVEYOR_TEST_PP", 0, 1, 64));
  const int m = static_cast<int>(EnvInt("CONVEYOR_TEST_M", 0, 1, 64));
  auto transport = ConnectFromEnvironment();
  const Batch batch = MakeBatch(SmallGpt(), 2 * m + 1, 6, kSeed);
  for (const ScheduleInfo& info : AllSchedules()) {
    Program program(Layout::Loop(1, 1, 1));
    try {
      program = Lower(BuildSchedule(info.name, ScheduleOptions{pp, m, 0}));
    } catch (const UserError&) {
      continue;
    }
    const StepOutcome outcome =
        RunRankStep(program, transport->rank(), *transport, SmallGpt(), kSeed, batch);
    WriteOutcome(
        std::string(dir) + "/" + std::string(info.name) + "." + std::to_string(transport->rank()),
        outcome);
  }
}

WorkerRun LaunchSelf(int pp, const std::string& worker, Environment env) {
  LaunchOptions options;
  options.extra_env = std::move(env);
  options.deadline = std::chrono::seconds(240);
  options.grace = std::chrono::seconds(2);
  std::ostringstream sink;
  options.out = &sink;
  return LaunchWorker(pp, worker, options);
}

TEST(PipelineProcessTest, MatchesFullBatchStepOverGloo) {
  for (const auto& [pp, m] : {std::pair{2, 3}, std::pair{4, 6}}) {
    const ScratchFolder scratch;  // removed at the end of each mesh
    const std::string& dir = scratch.path();
    const WorkerRun run = LaunchSelf(pp, "PipelineEquivalence",
                                     {{"CONVEYOR_TEST_DIR", dir},
                                      {"CONVEYOR_TEST_PP", std::to_string(pp)},
                                      {"CONVEYOR_TEST_M", std::to_string(m)},
                                      {"OMP_NUM_THREADS", "1"}});
    ASSERT_TRUE(run.launch.ok()) << run.launch.Report();
    ASSERT_EQ(static_cast<int>(run.finished.size()), pp) << "not every rank ran the worker";
    const StepOutcome want =
        RunReference(SmallGpt(), kSeed, {MakeBatch(SmallGpt(), 2 * m + 1, 6, kSeed)}, 0);
    int checked = 0;
    for (const ScheduleInfo& info : AllSchedules()) {
      const std::string base = dir + "/" + std::string(info.name) + ".";
      if (!std::filesystem::exists(base + "0")) continue;
      StepOutcome got;
      for (int r = 0; r < pp; ++r) AddOutcome(base + std::to_string(r), got);
      const std::string what = std::string(info.name) + " pp=" + std::to_string(pp);
      EXPECT_NEAR(got.loss, want.loss, 1e-5 * std::abs(want.loss)) << what;
      ASSERT_EQ(got.grads.size(), want.grads.size()) << what;
      for (const auto& [name, grad] : want.grads) {
        const double scale = grad.abs().max().item<double>() + 1e-12;
        const double diff = (got.grads.at(name) - grad).abs().max().item<double>();
        EXPECT_LE(diff, 1e-4 * scale) << what << ": " << name;
      }
      ++checked;
    }
    EXPECT_GE(checked, 6) << "pp=" << pp << ": too few schedules ran";
  }
}

// Synthetic slow stages, many steps; the rank named by CONVEYOR_TEST_FAIL throws (mode
// "throw") or kills itself (mode "kill") in its third step. Every rank leaves through exit.
CONVEYOR_WORKER(FailingPipeline) {
  const int fail_rank = static_cast<int>(EnvInt("CONVEYOR_TEST_FAIL", 0, 0, 63));
  const char* mode_variable = std::getenv("CONVEYOR_TEST_FAIL_MODE");
  const std::string mode = mode_variable != nullptr ? mode_variable : "throw";
  auto transport = ConnectFromEnvironment();
  const Program program = Lower(BuildSchedule("1f1b", ScheduleOptions{4, 8, 0}));
  const int rank = transport->rank();
  PipelineRank pipeline(
      program, rank, transport.get(),
      [&](int stage) {
        return MakeSyntheticStage(stage, SyntheticCosts{0.005, 0.005, 0.005});
      },
      at::TensorOptions().dtype(at::kFloat));
  int step = 0;
  pipeline.executor().set_hook([&](const Span& span) {
    const Action& a = span.action;
    if (rank == fail_rank && step == 2 && a.op == Op::kForward && a.microbatch == 3) {
      if (mode == "kill") std::raise(SIGKILL);
      throw std::runtime_error("injected failure");
    }
  });
  Batch batch;
  batch.inputs = at::zeros({8, 1}, at::kLong);
  batch.targets = at::zeros({8, 1}, at::kLong);
  try {
    for (step = 0; step < 1000; ++step) pipeline.Step(SplitBatch(batch, 8));
  } catch (const CommError& e) {
    transport->ReportFailure(e.what());
    std::cerr << e.what() << "\n";
    std::exit(e.caused_by_peer() ? kExitPeerFailed : 3);
  } catch (const std::exception& e) {
    transport->ReportFailure(e.what());
    std::cerr << e.what() << "\n";
    std::exit(3);
  }
}

TEST(PipelineProcessTest, ThrowingRankStopsEveryRankAndIsNamed) {
  const WorkerRun run = LaunchSelf(4, "FailingPipeline",
                                   {{"CONVEYOR_TEST_FAIL", "2"},
                                    {"CONVEYOR_TEST_FAIL_MODE", "throw"},
                                    {"OMP_NUM_THREADS", "1"}});
  const LaunchResult& result = run.launch;
  EXPECT_FALSE(result.ok());
  EXPECT_EQ(result.failed_rank, 2) << result.Report();
  EXPECT_FALSE(result.deadline_exceeded);
  const std::string report = result.Report();
  EXPECT_NE(report.find("rank 2, stage 2, micro-batch 3, action 2F3: injected failure"),
            std::string::npos)
      << report;
}

TEST(PipelineProcessTest, KilledRankStopsEveryRank) {
  const WorkerRun run = LaunchSelf(
      4, "FailingPipeline",
      {{"CONVEYOR_TEST_FAIL", "1"}, {"CONVEYOR_TEST_FAIL_MODE", "kill"}, {"OMP_NUM_THREADS", "1"}});
  const LaunchResult& result = run.launch;
  EXPECT_FALSE(result.ok());
  EXPECT_FALSE(result.deadline_exceeded) << result.Report();
  ASSERT_GE(result.failed_rank, 0);
  const RankOutcome& killed = result.ranks[1];
  EXPECT_FALSE(killed.exited);
  EXPECT_EQ(killed.signal, SIGKILL);
  EXPECT_NE(result.Report().find("rank 1"), std::string::npos) << result.Report();
}

}  // namespace
}  // namespace conveyor
