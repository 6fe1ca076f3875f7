#include "conveyor/cli/output.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "conveyor/common/error.h"
#include "conveyor/common/remove_tree.h"

namespace conveyor {
namespace {

namespace fs = std::filesystem;

bool IsCharDevice(const char* path) {
  struct stat st;
  return ::stat(path, &st) == 0 && S_ISCHR(st.st_mode);
}

// `-o /dev/full` used to rename PATH.tmp over the device, turning it into a regular file.
TEST(OutputTest, DevFullFailsNamingTheReasonAndStaysADevice) {
  if (!IsCharDevice("/dev/full")) GTEST_SKIP() << "no /dev/full here";
  try {
    WriteOutput("/dev/full", "0F0,0B0\n");
    ADD_FAILURE() << "writing to /dev/full succeeded";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("/dev/full"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(std::strerror(ENOSPC)), std::string::npos) << e.what();
  }
  EXPECT_TRUE(IsCharDevice("/dev/full"));
}

TEST(OutputTest, DevNullWorksAndStaysADevice) {
  if (!IsCharDevice("/dev/null")) GTEST_SKIP() << "no /dev/null here";
  WriteOutput("/dev/null", "makespan 27\n");
  EXPECT_TRUE(IsCharDevice("/dev/null"));
}

TEST(OutputTest, RefusesAFolderAndLeavesNoTemporaryFile) {
  const fs::path parent =
      fs::temp_directory_path() / ("conveyor_output_" + std::to_string(::getpid()));
  const fs::path folder = parent / "somedir";
  fs::create_directories(folder);
  EXPECT_THROW(WriteOutput(folder.string(), "x"), UserError);
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(parent)) {
    names.push_back(entry.path().filename().string());
  }
  RemoveTree(parent);
  EXPECT_EQ(names, std::vector<std::string>{"somedir"});
}

TEST(OutputTest, WritesAFile) {
  const fs::path path =
      fs::temp_directory_path() / ("conveyor_output_" + std::to_string(::getpid()) + ".csv");
  WriteOutput(path.string(), "0F0\n");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  fs::remove(path);
  EXPECT_EQ(text.str(), "0F0\n");
}

// `conveyor plan > /dev/full` must fail too, not exit 0 with nothing written.
TEST(OutputTest, AFailedStdoutIsAnError) {
  if (!IsCharDevice("/dev/full")) GTEST_SKIP() << "no /dev/full here";
  std::cout.flush();
  std::fflush(stdout);
  const int saved = ::dup(STDOUT_FILENO);
  const int full = ::open("/dev/full", O_WRONLY);
  ASSERT_GE(saved, 0);
  ASSERT_GE(full, 0);
  ::dup2(full, STDOUT_FILENO);
  bool refused = false;
  try {
    WriteOutput("", "a timeline\n");
  } catch (const UserError&) {
    refused = true;
  }
  ::dup2(saved, STDOUT_FILENO);
  ::close(saved);
  ::close(full);
  std::cout.clear();
  std::clearerr(stdout);
  EXPECT_TRUE(refused);
}

}  // namespace
}  // namespace conveyor
