#include "conveyor/comm/rendezvous.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "conveyor/comm/c10d_transport.h"
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
      HasSubstr("MASTER_PORT=70000 is outside [1, 65535]"));
  EXPECT_THAT(ErrorOf({{"OMPI_COMM_WORLD_RANK", "0"}}),
              HasSubstr("OMPI_COMM_WORLD_SIZE is not set"));
  EXPECT_THAT(ErrorOf({}), HasSubstr("no rank in the environment"));
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

// The store's rendezvous as rank `rank` of 2 at 127.0.0.1:`port`, bounded by 1 s; returns the
// error ("no error" if it connected).
std::string ConnectError(int rank, int port) {
  RendezvousInfo info;
  info.rank = rank;
  info.world_size = 2;
  info.master_addr = "127.0.0.1";
  info.master_port = port;
  C10dOptions options;
  options.connect_timeout = std::chrono::seconds(1);
  try {
    ConnectC10d(info, options);
  } catch (const CommError& e) {
    return e.what();
  }
  return "no error";
}

TEST(RendezvousTest, RankThatNeverArrivesIsNamedWithinTheTimeout) {
  std::string error = ConnectError(0, PickFreePort());
  EXPECT_THAT(error, HasSubstr("rank 0 of 2: rendezvous at 127.0.0.1:"));
  EXPECT_THAT(error, HasSubstr("timed out after 1 s: rank 1 did not arrive"));
}

TEST(RendezvousTest, MissingStoreNamesRank0WithinTheTimeout) {
  std::string error = ConnectError(1, PickFreePort());
  EXPECT_THAT(error, HasSubstr("rank 1 of 2: rendezvous at the store 127.0.0.1:"));
  EXPECT_THAT(error, HasSubstr("rank 0 serves it"));
}

TEST(RendezvousTest, AnotherProgramOnThePortIsNotTakenForTheStore) {
  // A listener that never answers: the kernel completes connections without accept().
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(fd, 16), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  std::string error = ConnectError(1, ntohs(address.sin_port));
  close(fd);
  EXPECT_THAT(error, HasSubstr("did not answer as a rendezvous store"));
  EXPECT_THAT(error, HasSubstr("another program on MASTER_PORT?"));
}

// The devices that this process's listening sockets on `port` are bound to ("" for none).
std::vector<std::string> ListenerDevices(int port) {
  std::vector<std::string> devices;
  DIR* dir = opendir("/proc/self/fd");
  while (dirent* entry = dir != nullptr ? readdir(dir) : nullptr) {
    const int fd = std::atoi(entry->d_name);
    int listening = 0;
    socklen_t length = sizeof(listening);
    sockaddr_in6 address{};
    socklen_t address_length = sizeof(address);
    if (fd <= 2 || getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &length) != 0 ||
        !listening ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&address), &address_length) != 0 ||
        ntohs(address.sin6_port) != port) {  // sin_port sits at the same offset
      continue;
    }
    char device[64] = {};
    length = sizeof(device);
    getsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, device, &length);
    devices.emplace_back(device);
  }
  if (dir != nullptr) closedir(dir);
  return devices;
}

TEST(RendezvousTest, LocalStoreIsReachableThroughLoopbackOnly) {
  RendezvousInfo info;
  info.master_addr = "127.0.0.1";
  info.master_port = PickFreePort();
  C10dOptions options;
  options.connect_timeout = std::chrono::seconds(30);
  std::unique_ptr<Transport> transport = ConnectC10d(info, options);
  EXPECT_THAT(ListenerDevices(info.master_port), ::testing::ElementsAre("lo"));
}

}  // namespace
}  // namespace conveyor
