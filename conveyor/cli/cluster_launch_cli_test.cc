// conveyor under the launchers of clusters: Slurm's srun (a one-node Slurm started here by
// scripts/one-node-slurm) and Open MPI's mpirun train the job conveyor's own launcher trains,
// to the same losses, each rank taking its share of the machine's cores and saying so
// (launch/thread_share.h): before, every rank took every core, 30 to 70 times slower. Their
// speed against conveyor's own launcher is measured by bench/launchers, not here. Skipped,
// with one line, where Slurm or Open MPI is not installed (scripts/install-deps --tests).
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <string>

#include "conveyor/cli/cli_testing.h"
#include "conveyor/common/process_stats.h"
#include "conveyor/launch/rendezvous.h"

namespace conveyor {
namespace {

// dp 2 x pp 2: 4 ranks.
constexpr char kJob[] =
    " train --pp 2 --dp 2 --layers 4 --hidden 32 --heads 2 --seq-len 32 --batch-size 8 "
    "--microbatches 2 --steps 4 --sample-tokens 0 --eval-every 0 --timeout 30 --data corpus.txt";

// The line a rank of 4 on this machine prints, the launcher's variable named.
std::string ThreadsLine(const std::string& variable) {
  return "threads: " + std::to_string(std::max(1, AvailableCores() / 4)) + " intra-op thread" +
         (AvailableCores() >= 8 ? "s" : "") + " a rank: 4 ranks on this machine (" + variable + ")";
}

// The job under conveyor's own launcher in `dir`, its metrics in own.json.
void TrainWithOwnLauncher(const std::string& dir) {
  const Result own =
      Shell("cd " + dir + " && timeout 120 " + CONVEYOR_BINARY + kJob + " --metrics own.json");
  ASSERT_EQ(own.code, 0) << own.out << own.err;
  EXPECT_NE(own.out.find(ThreadsLine("LOCAL_WORLD_SIZE=4")), std::string::npos) << own.out;
}

std::string Rendezvous() {
  return "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(PickFreePort());
}

TEST(ClusterLaunchTest, SrunTrainsAsConveyorsOwnLauncherDoes) {
  const std::string dir = ScratchWithCorpus("srun");
  const std::string slurm = dir + "/slurm";
  const std::string script = std::string(CONVEYOR_SOURCE_DIR) + "/scripts/one-node-slurm";
  Result up = Shell(script + " start " + slurm);
  if (up.code == 77) GTEST_SKIP() << up.err;
  if (up.code != 0) {  // once seen under load: slurmd never registered; its logs say why
    std::cerr << "one-node Slurm did not start, trying once more:\n" << up.err;
    up = Shell(script + " start " + slurm);
  }
  ASSERT_EQ(up.code, 0) << up.out << up.err;
  struct Stop {
    std::string command;
    ~Stop() { Shell(command); }
  } stop{script + " stop " + slurm};

  TrainWithOwnLauncher(dir);
  const Result srun = Shell("cd " + dir + " && export SLURM_CONF=" + slurm + "/slurm.conf " +
                            Rendezvous() + " && timeout 120 srun -n 4 -O --kill-on-bad-exit=1 " +
                            CONVEYOR_BINARY + kJob + " --metrics srun.json");
  ASSERT_EQ(srun.code, 0) << srun.out << srun.err;
  EXPECT_TRUE(SameLosses(dir + "/own.json", dir + "/srun.json", 4, 1e-6));
  EXPECT_NE(srun.out.find(ThreadsLine("SLURM_STEP_TASKS_PER_NODE=4")), std::string::npos)
      << srun.out;
}

TEST(ClusterLaunchTest, MpirunTrainsAsConveyorsOwnLauncherDoes) {
  if (Shell("command -v mpirun").code != 0) {
    GTEST_SKIP() << "mpirun is not installed (scripts/install-deps --tests installs openmpi-bin)";
  }
  const std::string dir = ScratchWithCorpus("mpirun");
  TrainWithOwnLauncher(dir);
  // Open MPI binds each rank to a core unless the ranks outnumber the cores; 4 on fewer than 4
  // cores need --oversubscribe.
  const Result mpirun =
      Shell("cd " + dir + " && export " + Rendezvous() +
            " && timeout 120 mpirun --allow-run-as-root --oversubscribe -n 4 -x MASTER_ADDR -x "
            "MASTER_PORT " +
            CONVEYOR_BINARY + kJob + " --metrics mpirun.json");
  ASSERT_EQ(mpirun.code, 0) << mpirun.out << mpirun.err;
  EXPECT_TRUE(SameLosses(dir + "/own.json", dir + "/mpirun.json", 4, 1e-6));
  EXPECT_NE(mpirun.out.find(ThreadsLine("OMPI_COMM_WORLD_LOCAL_SIZE=4")), std::string::npos)
      << mpirun.out;
}

}  // namespace
}  // namespace conveyor
