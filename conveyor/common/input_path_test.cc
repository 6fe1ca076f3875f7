#include "conveyor/common/input_path.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <functional>

#include "conveyor/common/error.h"
#include "conveyor/common/scratch_folder_testing.h"

namespace conveyor {
namespace {

namespace fs = std::filesystem;

// The message of the UserError `f` throws ("" when it throws none).
std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(InputPathTest, AcceptsWhatIsAskedFor) {
  ScratchFolder scratch;
  const std::string file = scratch.Write("a.txt", "text");
  fs::create_symlink(file, scratch.Path("link"));
  EXPECT_NO_THROW(CheckInputPath("--data", file, PathKind::kFile));
  EXPECT_NO_THROW(CheckInputPath("--data", scratch.Path("link"), PathKind::kFileOrFolder));
  EXPECT_NO_THROW(CheckInputPath("--data", scratch.path(), PathKind::kFolder));
  EXPECT_NO_THROW(CheckInputPath("--data", scratch.path(), PathKind::kFileOrFolder));
  EXPECT_EQ(ReadInputFile("--input", scratch.Path("link")), "text");
}

TEST(InputPathTest, EachRefusalIsOneLineNamingTheFlagAndThePath) {
  ScratchFolder scratch;
  const std::string file = scratch.Write("a.txt", "text");
  const std::string loop = scratch.Path("loop1"), dangling = scratch.Path("dangling");
  fs::create_symlink(scratch.Path("loop2"), loop);
  fs::create_symlink(loop, scratch.Path("loop2"));
  fs::create_symlink(scratch.Path("nothing"), dangling);
  const std::string fifo = scratch.Path("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::string dir = scratch.path();
  EXPECT_EQ(ErrorOf([&] { CheckInputPath("--data", dir, PathKind::kFile); }),
            "--data " + dir + ": is a directory, expected a file");
  EXPECT_EQ(ErrorOf([&] { ReadInputFile("config file", dir); }),
            "config file " + dir + ": is a directory, expected a file");
  EXPECT_EQ(ErrorOf([&] { CheckInputPath("--resume", file, PathKind::kFolder); }),
            "--resume " + file + ": is a file, expected a directory");
  EXPECT_EQ(ErrorOf([&] { CheckInputPath("--data", loop, PathKind::kFileOrFolder); }),
            "--data " + loop + ": its symbolic links loop (or nest too deep): it names no file");
  EXPECT_EQ(ErrorOf([&] { CheckInputPath("--input", dangling, PathKind::kFile); }),
            "--input " + dangling + ": is a symbolic link to nothing (its target does not exist)");
  EXPECT_EQ(ErrorOf([&] { CheckInputPath("--input", dir + "/missing", PathKind::kFile); }),
            "--input " + dir + "/missing: does not exist");
  EXPECT_EQ(ErrorOf([&] { CheckInputPath("--input", file + "/below", PathKind::kFile); }),
            "--input " + file + "/below: cannot be reached: Not a directory");
  EXPECT_EQ(
      ErrorOf([&] { CheckInputPath("--data", fifo, PathKind::kFileOrFolder); }),
      "--data " + fifo +
          ": is neither a file nor a directory (a device, a pipe or a socket), expected a file "
          "or a directory");
}

}  // namespace
}  // namespace conveyor
