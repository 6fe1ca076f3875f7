// The rendezvous through rank 0's TCPStore (C10dWorld, reached through ConnectC10d): bounded
// by the connect timeout, naming the rank that is missing, refusing a port held by another
// program, and listening on loopback only for a local run; through torchrun's store instead
// when the launcher serves one.
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

#include "conveyor/comm/c10d_compat.h"
#include "conveyor/comm/c10d_transport.h"
#include "conveyor/comm/comm_error.h"
#include "conveyor/launch/rendezvous.h"

namespace conveyor {
namespace {

using ::testing::HasSubstr;

// The store's rendezvous as rank `rank` of 2 at `host`:`port`, bounded by 1 s; returns the
// error ("no error" if it connected).
std::string ConnectError(int rank, int port, const std::string& host = "127.0.0.1") {
  RendezvousInfo info;
  info.rank = rank;
  info.world_size = 2;
  info.master_addr = host;
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

// A listener on 127.0.0.1 that never answers (the kernel completes connections without
// accept()): its fd, or -1; its port into `port`.
int SilentListener(int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(fd, 16) != 0 || getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  *port = ntohs(address.sin_port);
  return fd;
}

TEST(C10dWorldTest, RankThatNeverArrivesIsNamedWithinTheTimeout) {
  std::string error = ConnectError(0, PickFreePort());
  EXPECT_THAT(error, HasSubstr("rank 0 of 2: rendezvous at 127.0.0.1:"));
  EXPECT_THAT(error, HasSubstr("timed out after 1 s: rank 1 did not arrive"));
}

TEST(C10dWorldTest, MissingStoreNamesRank0WithinTheTimeout) {
  std::string error = ConnectError(1, PickFreePort());
  EXPECT_THAT(error, HasSubstr("rank 1 of 2: rendezvous at the store 127.0.0.1:"));
  EXPECT_THAT(error, HasSubstr("rank 0 serves it"));
}

TEST(C10dWorldTest, AnotherProgramOnThePortIsNotTakenForTheStore) {
  int port = 0;
  const int fd = SilentListener(&port);
  ASSERT_GE(fd, 0);
  std::string error = ConnectError(1, port);
  close(fd);
  EXPECT_THAT(error, HasSubstr("did not answer as a rendezvous store"));
  EXPECT_THAT(error, HasSubstr("another program on MASTER_PORT?"));
}

// Rank 0 on a port another program holds, and an address that does not resolve: one line
// each naming the cause, before the store tries (and logs its attempts).
TEST(C10dWorldTest, ABusyPortAndAnUnknownHostAreNamed) {
  int port = 0;
  const int fd = SilentListener(&port);
  ASSERT_GE(fd, 0);
  const std::string busy = ConnectError(0, port);
  close(fd);
  EXPECT_THAT(busy, HasSubstr("rank 0 of 2: MASTER_PORT " + std::to_string(port) +
                              " is in use on this host by another program"));
  const std::string unknown = ConnectError(1, PickFreePort(), "no-such-host.invalid");
  EXPECT_THAT(unknown, HasSubstr("MASTER_ADDR 'no-such-host.invalid' cannot be resolved"));
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

TEST(C10dWorldTest, LocalStoreIsReachableThroughLoopbackOnly) {
  RendezvousInfo info;
  info.master_addr = "127.0.0.1";
  info.master_port = PickFreePort();
  C10dOptions options;
  options.connect_timeout = std::chrono::seconds(30);
  std::unique_ptr<Transport> transport = ConnectC10d(info, options);
  EXPECT_THAT(ListenerDevices(info.master_port), ::testing::ElementsAre("lo"));
}

TEST(C10dWorldTest, StoreServedByTheLauncherIsJoinedUnderThePrefix) {
  // The launcher's store (torchrun's agent) already listens on MASTER_PORT.
  c10d::TCPStoreOptions agent_options;
  agent_options.port = static_cast<std::uint16_t>(PickFreePort());
  agent_options.isServer = true;
  agent_options.waitWorkers = false;
  UseClassicTcpStore(agent_options);
  c10d::TCPStore agent("127.0.0.1", agent_options);
  RendezvousInfo info;
  info.master_addr = "127.0.0.1";
  info.master_port = agent.getPort();
  info.launcher_serves_store = true;
  info.store_prefix = "conveyor/attempt_1";
  C10dOptions options;
  options.connect_timeout = std::chrono::seconds(30);
  // Rank 0 serving the store itself would fail: the port is taken.
  std::unique_ptr<Transport> transport = ConnectC10d(info, options);
  EXPECT_TRUE(agent.check({"conveyor/attempt_1/conveyor/heartbeat/0"}));
  EXPECT_FALSE(agent.check({"conveyor/heartbeat/0"}));
}

}  // namespace
}  // namespace conveyor
