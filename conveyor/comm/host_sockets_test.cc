#include "conveyor/comm/host_sockets.h"

#include <gtest/gtest.h>

namespace conveyor {
namespace {

TEST(HostSocketsTest, TellsThisHostsAddressesFromOthers) {
  EXPECT_TRUE(IsAddressOfThisHost("127.0.0.1"));
  EXPECT_TRUE(IsAddressOfThisHost("127.0.0.2"));  // all of 127/8
  EXPECT_TRUE(IsAddressOfThisHost("localhost"));
  EXPECT_FALSE(IsAddressOfThisHost("192.0.2.1"));  // TEST-NET-1: documentation only
  EXPECT_FALSE(IsAddressOfThisHost("no-such-host.invalid"));
}

}  // namespace
}  // namespace conveyor
