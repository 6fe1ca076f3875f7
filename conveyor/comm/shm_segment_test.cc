#include "conveyor/comm/shm_segment.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
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

// HostIdentity as another process computes it; with `new_network`, after moving to a network
// namespace of its own (needs CAP_SYS_ADMIN: nullopt when that is refused).
std::optional<std::string> IdentityInChild(bool new_network) {
  int fds[2];
  if (pipe(fds) != 0) return std::nullopt;
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    if (new_network && unshare(CLONE_NEWNET) != 0) _exit(3);
    const std::string id = ShmSegment::HostIdentity();
    _exit(write(fds[1], id.data(), id.size()) == static_cast<ssize_t>(id.size()) ? 0 : 4);
  }
  close(fds[1]);
  std::string id;
  char buffer[256];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof buffer)) > 0;) id.append(buffer, n);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  return id;
}

// Two processes of one host agree (nothing per-process in the identity); a process in another
// network namespace counts as another host, so ranks there talk over the network.
TEST(ShmSegmentTest, HostIdentityIsSharedByProcessesAndNamesTheNetworkNamespace) {
  const std::string mine = ShmSegment::HostIdentity();
  EXPECT_NE(mine.find("net:["), std::string::npos) << mine;
  const std::optional<std::string> sibling = IdentityInChild(false);
  ASSERT_TRUE(sibling.has_value());
  EXPECT_EQ(*sibling, mine);
  const std::optional<std::string> elsewhere = IdentityInChild(true);
  if (!elsewhere) GTEST_SKIP() << "no permission to make a network namespace here";
  EXPECT_NE(*elsewhere, mine);
}

}  // namespace
}  // namespace conveyor
