#include "conveyor/nn/parallel_group.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "conveyor/comm/local_transport.h"
#include "conveyor/common/error.h"

namespace conveyor {
namespace {

// The message CheckParallelGroup refuses with ("" where it accepts).
std::string Refusal(int size, int rank, const Transport* group) {
  try {
    CheckParallelGroup("context-parallel", "CP", size, rank, group);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(ParallelGroupTest, RefusesSizesThatDisagreeWithTheGroupNamingThem) {
  const std::vector<std::unique_ptr<Transport>> world = LocalWorld(2);
  EXPECT_EQ(Refusal(1, 0, nullptr), "");
  EXPECT_EQ(Refusal(2, 1, world[1].get()), "");
  EXPECT_NE(Refusal(0, 0, nullptr).find("the context-parallel size must be at least 1, got 0"),
            std::string::npos);
  EXPECT_NE(Refusal(2, 2, world[0].get()).find("context-parallel rank 2 is outside [0, 2)"),
            std::string::npos);
  EXPECT_NE(Refusal(2, 0, nullptr).find("size 2 needs the CP group's transport, got none"),
            std::string::npos);
  EXPECT_NE(Refusal(2, 0, world[1].get())
                .find("the context-parallel group is rank 1 of 2, but the model is built for "
                      "rank 0 of 2"),
            std::string::npos)
      << Refusal(2, 0, world[1].get());
  EXPECT_NE(Refusal(1, 0, world[0].get()).find("group is rank 0 of 2"), std::string::npos);
}

}  // namespace
}  // namespace conveyor
