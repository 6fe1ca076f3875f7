#include "conveyor/common/atomic_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "conveyor/common/error.h"
#include "conveyor/common/file_size_limit_testing.h"
#include "conveyor/common/scratch_folder_testing.h"

namespace conveyor {
namespace {

namespace fs = std::filesystem;

class AtomicFileTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& name) const { return scratch_.Path(name); }
  // The names in the test's folder.
  std::set<std::string> Names() const { return scratch_.Names(); }

  ScratchFolder scratch_;
};

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool IsCharDevice(const char* path) {
  struct stat st;
  return ::stat(path, &st) == 0 && S_ISCHR(st.st_mode);
}

// Expects `write` to throw UserError whose message holds every one of `parts`.
template <typename F>
void ExpectRefused(F write, std::initializer_list<std::string> parts) {
  try {
    write();
    ADD_FAILURE() << "no error; expected one naming " << *parts.begin();
  } catch (const UserError& e) {
    for (const std::string& part : parts) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  }
}

TEST_F(AtomicFileTest, WritesANewFileAndReplacesAnOldOneKeepingItsPermissions) {
  const std::string path = Path("out.txt");
  WriteFileAtomically(path, "first\n");
  EXPECT_EQ(Read(path), "first\n");
  fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write);
  WriteFileAtomically(path, "second\n");
  EXPECT_EQ(Read(path), "second\n");
  EXPECT_EQ(fs::status(path).permissions(), fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(Names(), std::set<std::string>{"out.txt"});
}

TEST_F(AtomicFileTest, TwoWritersOfOnePathDoNotShareATemporaryFile) {
  const std::string path = Path("shared.txt");
  AtomicFile a(path);
  AtomicFile b(path);
  a.Write("from a, longer than b's text\n");
  b.Write("from b\n");
  EXPECT_EQ(Names().size(), 2u);  // two temporary files
  a.Commit();
  EXPECT_EQ(Read(path), "from a, longer than b's text\n");
  b.Commit();
  EXPECT_EQ(Read(path), "from b\n");
  EXPECT_EQ(Names(), std::set<std::string>{"shared.txt"});
}

TEST_F(AtomicFileTest, AnAbandonedWriteLeavesTheOldFileAndNoTemporaryFile) {
  const std::string path = Path("kept.txt");
  WriteFileAtomically(path, "old");
  try {
    AtomicFile file(path);
    file.Write("half of the new");
    throw std::runtime_error("the writer failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(Read(path), "old");
  EXPECT_EQ(Names(), std::set<std::string>{"kept.txt"});
}

// A write the kernel refuses midway (here: past RLIMIT_FSIZE, which needs no root): an error
// naming the file, the old contents kept, no temporary file left.
TEST_F(AtomicFileTest, AFailedWriteLeavesTheOldFileAndNoTemporaryFile) {
  const std::string path = Path("limited.txt");
  WriteFileAtomically(path, "old");
  {
    const FileSizeLimit limit(4096);
    ExpectRefused([&] { WriteFileAtomically(path, std::string(1 << 16, 'x')); },
                  {path, std::strerror(EFBIG)});
  }
  EXPECT_EQ(Read(path), "old");
  EXPECT_EQ(Names(), std::set<std::string>{"limited.txt"});
}

// A real full disk: a 64 KiB tmpfs. Mounting needs root (CAP_SYS_ADMIN); skipped without.
TEST_F(AtomicFileTest, AFullDiskGivesAnErrorAndLeavesNoTemporaryFile) {
  const fs::path mount_point = Path("tiny");
  fs::create_directories(mount_point);
  if (::mount("tmpfs", mount_point.c_str(), "tmpfs", 0, "size=64k") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here: " << std::strerror(errno);
  }
  const std::string path = (mount_point / "plan.csv").string();
  WriteFileAtomically(path, "old");
  ExpectRefused([&] { WriteFileAtomically(path, std::string(1 << 20, 'x')); },
                {path, std::strerror(ENOSPC)});
  const std::string kept = Read(path);
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(mount_point)) {
    names.insert(entry.path().filename().string());
  }
  ::umount2(mount_point.c_str(), MNT_DETACH);
  EXPECT_EQ(kept, "old");
  EXPECT_EQ(names, std::set<std::string>{"plan.csv"});
}

TEST_F(AtomicFileTest, DevFullFailsWithNoSpaceAndStaysADevice) {
  if (!IsCharDevice("/dev/full")) GTEST_SKIP() << "no /dev/full here";
  ExpectRefused([] { WriteFileAtomically("/dev/full", "a plan\n"); },
                {"/dev/full", std::strerror(ENOSPC)});
  EXPECT_TRUE(IsCharDevice("/dev/full"));
}

TEST_F(AtomicFileTest, DevNullTakesTheBytesAndStaysADevice) {
  if (!IsCharDevice("/dev/null")) GTEST_SKIP() << "no /dev/null here";
  WriteFileAtomically("/dev/null", "a plan\n");
  EXPECT_TRUE(IsCharDevice("/dev/null"));
}

TEST_F(AtomicFileTest, WritesIntoAFifoDirectly) {
  const std::string path = Path("pipe");
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0) << std::strerror(errno);
  // The reader opens first (non-blocking), so the writer's open does not wait.
  const int reader = ::open(path.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0) << std::strerror(errno);
  WriteFileAtomically(path, "through the pipe");
  char buffer[64] = {};
  const ssize_t n = ::read(reader, buffer, sizeof buffer);
  ::close(reader);
  EXPECT_EQ(std::string(buffer, n > 0 ? n : 0), "through the pipe");
  EXPECT_TRUE(fs::is_fifo(path));
  EXPECT_EQ(Names(), std::set<std::string>{"pipe"});
}

// A FIFO nobody reads: refused after kFifoReaderWait instead of blocking forever (as
// `--metrics` naming one did, after the whole training run); one that gets a reader within
// the wait is written.
TEST_F(AtomicFileTest, AFifoWithoutAReaderIsRefusedAfterAWait) {
  const std::string path = Path("pipe");
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0) << std::strerror(errno);
  try {
    WriteFileAtomically(path, "nobody listens");
    ADD_FAILURE() << "written with no reader";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("it is a FIFO that nothing reads (waited 10 s"),
              std::string::npos)
        << e.what();
  }
  std::string read;
  std::thread late_reader([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::ifstream in(path);
    read.assign(std::istreambuf_iterator<char>(in), {});
  });
  WriteFileAtomically(path, "a late reader");
  late_reader.join();
  EXPECT_EQ(read, "a late reader");
  EXPECT_TRUE(fs::is_fifo(path));
}

TEST_F(AtomicFileTest, RefusesAFolderAndLeavesNothingBeside) {
  const std::string folder = Path("somedir");
  fs::create_directories(folder);
  ExpectRefused([&] { WriteFileAtomically(folder, "x"); }, {folder, "is a folder"});
  EXPECT_TRUE(fs::is_directory(folder));
  EXPECT_EQ(Names(), std::set<std::string>{"somedir"});
}

TEST_F(AtomicFileTest, ReplacesTheTargetOfASymbolicLinkAndKeepsTheLink) {
  const std::string target = Path("target.txt");
  const std::string link = Path("link.txt");
  WriteFileAtomically(target, "old");
  fs::create_symlink(target, link);
  WriteFileAtomically(link, "new");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(Read(target), "new");
  EXPECT_EQ(Names(), (std::set<std::string>{"link.txt", "target.txt"}));
  const std::string dangling = Path("dangling");
  fs::create_symlink(Path("nothing"), dangling);
  ExpectRefused([&] { WriteFileAtomically(dangling, "x"); }, {dangling, "symbolic link"});
  EXPECT_FALSE(fs::exists(Path("nothing")));
}

TEST_F(AtomicFileTest, NamesTheFileWhenItsFolderIsMissing) {
  const std::string path = Path("no/such/folder/m.json");
  ExpectRefused([&] { WriteFileAtomically(path, "{}"); }, {path, std::strerror(ENOENT)});
  ExpectRefused([&] { SyncFolder(Path("missing")); }, {Path("missing")});
}

}  // namespace
}  // namespace conveyor
