#include "conveyor/comm/shm_segment.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <numeric>
#include <stdexcept>
#include <vector>

namespace conveyor {
namespace {

std::string TestName(const char* what) {
  return ShmSegment::Name(std::string("segment-test-") + what, static_cast<int>(getpid()));
}

TEST(ShmSegmentTest, CreatorAndOpenerSeeTheSameBytesAndTheNameGoesWithTheCreator) {
  const std::string name = TestName("share");
  const std::size_t bytes = ShmSegment::Bytes(2, 4096);
  EXPECT_EQ(bytes, 4096u + 2 * (256u + 4096u));
  auto created = ShmSegment::Map(name, bytes, /*create=*/true);
  created->header().magic = ShmSegmentHeader::kMagic;
  created->data(1, 4096)[7] = std::byte{42};
  {
    auto opened = ShmSegment::Map(name, bytes, /*create=*/false);
    EXPECT_EQ(opened->header().magic, ShmSegmentHeader::kMagic);
    EXPECT_EQ(opened->data(1, 4096)[7], std::byte{42});
    // A second creator of the same name is refused (O_EXCL), as is the wrong size.
    EXPECT_THROW(ShmSegment::Map(name, bytes, /*create=*/true), std::runtime_error);
    EXPECT_THROW(ShmSegment::Map(name, bytes + 4096, /*create=*/false), std::runtime_error);
  }
  created->Unlink();
  EXPECT_THROW(ShmSegment::Map(name, bytes, /*create=*/false), std::runtime_error);
  created->Unlink();  // idempotent
}

TEST(ShmSegmentTest, RingCopiesWrapAroundTheEnd) {
  std::vector<std::byte> storage(16);
  ShmRing ring{nullptr, storage.data(), storage.size()};
  std::vector<std::byte> in(10), out(10);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = std::byte(i + 1);
  ring.CopyIn(/*position=*/16 * 3 + 12, in.data(), in.size());  // 4 at the end, 6 at the start
  EXPECT_EQ(storage[12], std::byte{1});
  EXPECT_EQ(storage[15], std::byte{4});
  EXPECT_EQ(storage[0], std::byte{5});
  EXPECT_EQ(storage[5], std::byte{10});
  ring.CopyOut(16 * 3 + 12, out.data(), out.size());
  EXPECT_EQ(out, in);
}

TEST(ShmSegmentTest, HostIdentityIsStableAndNamesTheNetworkNamespace) {
  EXPECT_FALSE(ShmSegment::HostIdentity().empty());
  EXPECT_EQ(ShmSegment::HostIdentity(), ShmSegment::HostIdentity());
  // Ranks in other network namespaces count as other hosts.
  EXPECT_NE(ShmSegment::HostIdentity().find("net:["), std::string::npos);
}

}  // namespace
}  // namespace conveyor
