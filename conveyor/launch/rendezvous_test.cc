#include "conveyor/launch/rendezvous.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

using ::testing::HasSubstr;

std::string ErrorOf(const Environment& env) {
  try {
    RendezvousFromEnvironment(env);
  } catch (const UserError& e) {
    return e.what();
  }
  return "no error";
}

TEST(RendezvousTest, ReadsTorchrunVariables) {
  RendezvousInfo info = RendezvousFromEnvironment({{"RANK", "5"},
                                                   {"WORLD_SIZE", "8"},
                                                   {"LOCAL_RANK", "1"},
                                                   {"MASTER_ADDR", "node0"},
                                                   {"MASTER_PORT", "29511"},
                                                   {"SLURM_PROCID", "0"}});
  EXPECT_EQ(info.launcher, "torchrun");
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.world_size, 8);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.master_addr, "node0");
  EXPECT_EQ(info.master_port, 29511);
}

TEST(RendezvousTest, EachLauncherSaysHowManyRanksShareThisNode) {
  const Environment master = {{"MASTER_ADDR", "h"}, {"MASTER_PORT", "29500"}};
  auto with = [&](Environment env) {
    env.insert(master.begin(), master.end());
    return RendezvousFromEnvironment(env);
  };
  RendezvousInfo info = with({{"RANK", "1"}, {"WORLD_SIZE", "8"}, {"LOCAL_WORLD_SIZE", "4"}});
  EXPECT_EQ(info.local_world_size, 4);
  EXPECT_EQ(info.local_world_size_variable, "LOCAL_WORLD_SIZE=4");
  info = with({{"OMPI_COMM_WORLD_RANK", "1"},
               {"OMPI_COMM_WORLD_SIZE", "4"},
               {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}});
  EXPECT_EQ(info.local_world_size, 4);
  EXPECT_EQ(info.local_world_size_variable, "OMPI_COMM_WORLD_LOCAL_SIZE=4");
  // Slurm lists the tasks of every node: 2 on each of nodes 0 to 2, then 1 on node 3.
  const Environment slurm = {{"SLURM_PROCID", "6"},
                             {"SLURM_NTASKS", "7"},
                             {"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"},
                             {"SLURM_TASKS_PER_NODE", "4(x2)"}};
  Environment env = slurm;
  env["SLURM_NODEID"] = "3";
  info = with(env);
  EXPECT_EQ(info.local_world_size, 1);
  EXPECT_EQ(info.local_world_size_variable, "SLURM_STEP_TASKS_PER_NODE=2(x3),1");
  env["SLURM_NODEID"] = "2";
  EXPECT_EQ(with(env).local_world_size, 2);
  env.erase("SLURM_STEP_TASKS_PER_NODE");  // a batch script's own process: the job's list
  env["SLURM_NODEID"] = "1";
  EXPECT_EQ(with(env).local_world_size, 4);
  // Nothing that reads: unknown, found when the ranks meet.
  for (const std::string list : {"", "x", "2(x", "2(y3)", "0", "2(x3)z"}) {
    env = slurm;
    env["SLURM_NODEID"] = "0";
    env["SLURM_STEP_TASKS_PER_NODE"] = list;
    env.erase("SLURM_TASKS_PER_NODE");
    EXPECT_EQ(with(env).local_world_size, 0) << list;
  }
  EXPECT_EQ(with({{"RANK", "1"}, {"WORLD_SIZE", "8"}}).local_world_size, 0);
  EXPECT_THAT(ErrorOf({{"RANK", "1"},
                       {"WORLD_SIZE", "8"},
                       {"LOCAL_WORLD_SIZE", "9"},
                       {"MASTER_ADDR", "h"},
                       {"MASTER_PORT", "1"}}),
              HasSubstr("LOCAL_WORLD_SIZE"));
}

TEST(RendezvousTest, TorchrunsAgentStoreIsUsedUnderAPrefixPerAttempt) {
  const Environment env = {{"RANK", "0"},
                           {"WORLD_SIZE", "4"},
                           {"MASTER_ADDR", "h"},
                           {"MASTER_PORT", "29500"},
                           {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                           {"TORCHELASTIC_RESTART_COUNT", "2"}};
  RendezvousInfo info = RendezvousFromEnvironment(env);
  EXPECT_TRUE(info.launcher_serves_store);
  EXPECT_EQ(info.store_prefix, "conveyor/attempt_2");

  Environment own = env;
  own["TORCHELASTIC_USE_AGENT_STORE"] = "False";
  info = RendezvousFromEnvironment(own);
  EXPECT_FALSE(info.launcher_serves_store);
  EXPECT_EQ(info.store_prefix, "");

  Environment bad = env;
  bad["TORCHELASTIC_RESTART_COUNT"] = "x";
  EXPECT_NE(ErrorOf(bad).find("TORCHELASTIC_RESTART_COUNT"), std::string::npos) << ErrorOf(bad);
}

TEST(RendezvousTest, LocalRankDefaultsToRank) {
  RendezvousInfo info = RendezvousFromEnvironment(
      {{"RANK", "2"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}});
  EXPECT_EQ(info.local_rank, 2);
}

TEST(RendezvousTest, ReadsSlurmVariables) {
  RendezvousInfo info = RendezvousFromEnvironment({{"SLURM_PROCID", "3"},
                                                   {"SLURM_NTASKS", "4"},
                                                   {"SLURM_LOCALID", "1"},
                                                   {"MASTER_ADDR", "gpu-17"},
                                                   {"MASTER_PORT", "6000"}});
  EXPECT_EQ(info.launcher, "slurm");
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.world_size, 4);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.master_addr, "gpu-17");
}

TEST(RendezvousTest, ReadsOpenMpiVariables) {
  RendezvousInfo info = RendezvousFromEnvironment({{"OMPI_COMM_WORLD_RANK", "0"},
                                                   {"OMPI_COMM_WORLD_SIZE", "2"},
                                                   {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                                   {"MASTER_ADDR", "10.0.0.1"},
                                                   {"MASTER_PORT", "7000"}});
  EXPECT_EQ(info.launcher, "openmpi");
  EXPECT_EQ(info.world_size, 2);
  EXPECT_EQ(info.master_port, 7000);
}

TEST(RendezvousTest, ErrorsNameTheVariableAndValue) {
  EXPECT_THAT(
      ErrorOf({{"RANK", "4"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}}),
      HasSubstr("RANK=4 is not below WORLD_SIZE=4"));
  EXPECT_THAT(ErrorOf({{"RANK", "x1"}, {"WORLD_SIZE", "4"}}),
              HasSubstr("RANK=\"x1\" is not an integer"));
  EXPECT_THAT(ErrorOf({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"MASTER_ADDR", "h"}}),
              HasSubstr("(slurm): MASTER_PORT is not set"));
  EXPECT_THAT(
      ErrorOf({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}}),
      HasSubstr("MASTER_PORT must be within [1, 65535], got 70000"));
  EXPECT_THAT(ErrorOf({{"RANK", "0"}}), HasSubstr("(torchrun): WORLD_SIZE is not set"));
  EXPECT_THAT(ErrorOf({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "two"}}),
              HasSubstr("SLURM_NTASKS=\"two\" is not an integer"));
  EXPECT_THAT(ErrorOf({}), HasSubstr("no rank in the environment"));
}

TEST(RendezvousTest, TorchrunRankAloneMakesALaunchedRank) {
  EXPECT_FALSE(LaunchedAsRank(Environment{}));
  EXPECT_TRUE(LaunchedAsRank({{"RANK", "0"}, {"WORLD_SIZE", "1"}}));
  EXPECT_TRUE(LaunchedAsRank({{"RANK", "0"}}));  // then RendezvousFromEnvironment says what lacks
}

TEST(RendezvousTest, SlurmAndOpenMpiCountOnlyWithMoreThanOneTask) {
  EXPECT_FALSE(LaunchedAsRank({{"SLURM_PROCID", "0"}}));
  EXPECT_FALSE(LaunchedAsRank({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}}));
  EXPECT_TRUE(LaunchedAsRank({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}}));
  EXPECT_FALSE(LaunchedAsRank({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}}));
  EXPECT_TRUE(LaunchedAsRank({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "3"}}));
  EXPECT_THAT(ErrorOf({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}}),
              HasSubstr("no rank in the environment"));
  EXPECT_THROW(LaunchedAsRank({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", ""}}), UserError);
}

TEST(RendezvousTest, ALoneSlurmTaskDefersToTheOpenMpiWorldInsideIt) {
  // mpirun inside a one-task Slurm job: the ranks are Open MPI's.
  const Environment env = {{"SLURM_PROCID", "0"},         {"SLURM_NTASKS", "1"},
                           {"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                           {"MASTER_ADDR", "h"},          {"MASTER_PORT", "5000"}};
  EXPECT_TRUE(LaunchedAsRank(env));
  const RendezvousInfo info = RendezvousFromEnvironment(env);
  EXPECT_EQ(info.launcher, "openmpi");
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.world_size, 4);
}

TEST(RendezvousTest, PicksABindablePort) {
  int port = PickFreePort();
  EXPECT_GT(port, 0);
  EXPECT_LE(port, 65535);
}

TEST(RendezvousTest, WorldSizeMustMatchTheCommand) {
  RendezvousInfo info = RendezvousFromEnvironment(
      {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "3"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}});
  EXPECT_NO_THROW(CheckWorldSize(info, 3, "--pp 3"));
  try {
    CheckWorldSize(info, 2, "--pp 2");
    ADD_FAILURE() << "a world of 3 accepted for --pp 2";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("SLURM_NTASKS=3 but --pp 2 needs 2 ranks"));
  }
}

}  // namespace
}  // namespace conveyor
