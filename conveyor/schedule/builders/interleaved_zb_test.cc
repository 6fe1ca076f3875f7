#include "conveyor/schedule/builders/interleaved_zb.h"

#include <gtest/gtest.h>

#include "conveyor/schedule/builders/builder_testing.h"
#include "conveyor/schedule/builders/zb_testing.h"

namespace conveyor {
namespace {

TEST(InterleavedZbTest, SoundForEveryShape) {
  for (int v = 2; v <= 4; ++v) {
    for (int p = 1; p <= 8; ++p) {
      for (int m = 1; m <= 3 * p + 1; ++m) {
        const Program program = BuildInterleavedZb({.pp = p, .microbatches = m, .chunks = v});
        ExpectSoundProgram(program, p, v, m, /*split_backward=*/true);
        // Interleaved 1F1B's rank-0 peak: 2(p - 1) + (v - 1)p warm-up forwards, plus one.
        ExpectSoundZbProgram(
            program, v * p + p - 1,
            "p=" + std::to_string(p) + " m=" + std::to_string(m) + " v=" + std::to_string(v));
      }
    }
  }
}

TEST(InterleavedZbTest, DefaultsToTwoChunks) {
  const Program program = BuildInterleavedZb({.pp = 3, .microbatches = 6});
  EXPECT_EQ(program.layout.num_stages(), 6);
  EXPECT_EQ(program.layout.placement(), Placement::kLoop);
}

TEST(InterleavedZbTest, Preconditions) {
  ExpectRejected(BuildInterleavedZb, {.pp = 0, .microbatches = 4}, "pp = 0");
  ExpectRejected(BuildInterleavedZb, {.pp = 2, .microbatches = 0}, "microbatches = 0");
  ExpectRejected(BuildInterleavedZb, {.pp = 2, .microbatches = 4, .chunks = 1}, "chunks = 1");
  ExpectRejected(BuildInterleavedZb, {.pp = 2, .microbatches = 4, .chunks = -3}, "chunks = -3");
  ExpectRejected(BuildInterleavedZb, {.pp = 2, .microbatches = 4, .chunks = 1}, "interleaved-zb");
}

}  // namespace
}  // namespace conveyor
