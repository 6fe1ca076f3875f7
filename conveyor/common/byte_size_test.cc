#include "conveyor/common/byte_size.h"

#include <gtest/gtest.h>

namespace conveyor {
namespace {

TEST(ByteSizeTest, SaysGiBFromOneGiBOn) {
  EXPECT_EQ(ByteSize(1 << 20), "1.0 MiB");
  EXPECT_EQ(ByteSize((1 << 30) - (1 << 20)), "1023.0 MiB");
  EXPECT_EQ(ByteSize(1.5 * (1 << 30)), "1.5 GiB");
}

}  // namespace
}  // namespace conveyor
