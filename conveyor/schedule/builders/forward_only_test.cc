#include "conveyor/schedule/builders/forward_only.h"

#include <gtest/gtest.h>

#include "conveyor/schedule/lower.h"

namespace conveyor {
namespace {

TEST(ForwardOnlyTest, EveryLayoutLowersWithoutDeadlock) {
  for (int p = 1; p <= 6; ++p) {
    for (int m = 1; m <= 5; ++m) {
      for (const Layout& layout : {Layout::Loop(p, 1, m), Layout::Loop(p, 3, m), Layout::V(p, m)}) {
        const Program program = BuildForwardOnly(layout);
        EXPECT_EQ(static_cast<int>(program.size()), layout.num_stages() * m);
        EXPECT_NO_THROW(Lower(program)) << layout.Describe();
      }
      if (m >= 2) {
        EXPECT_NO_THROW(Lower(BuildForwardOnly(Layout::Dual(p, m))));
      }
    }
  }
}

TEST(ForwardOnlyTest, StagesInAscendingOrder) {
  const Program program = BuildForwardOnly(Layout::V(2, 2));
  EXPECT_EQ(program.ToText(), "rank 0: 0F0 0F1 3F0 3F1\nrank 1: 1F0 1F1 2F0 2F1\n");
}

}  // namespace
}  // namespace conveyor
