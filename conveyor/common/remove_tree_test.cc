#include "conveyor/common/remove_tree.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "conveyor/common/scratch_folder_testing.h"

namespace conveyor {
namespace {

namespace fs = std::filesystem;

TEST(RemoveTreeTest, RemovesAFolderWithEverythingInItButNotWhatALinkPointsTo) {
  ScratchFolder scratch;
  const std::string kept = scratch.Write("kept/file", "stays");
  const fs::path tree = scratch.Path("tree");
  fs::create_directories(tree / "a" / "b" / "c");
  std::ofstream(tree / "a" / "b" / "c" / "deep") << "x";
  std::ofstream(tree / "top") << "y";
  fs::create_directory_symlink(scratch.Path("kept"), tree / "a" / "link");
  // 7 entries: tree, a, b, c, deep, top, link.
  EXPECT_EQ(RemoveTree(tree), 7u);
  EXPECT_FALSE(fs::exists(tree));
  EXPECT_TRUE(fs::exists(kept));
}

TEST(RemoveTreeTest, AFileIsRemovedAndAMissingPathIsNoError) {
  ScratchFolder scratch;
  const std::string file = scratch.Write("file", "z");
  EXPECT_EQ(RemoveTree(file), 1u);
  EXPECT_FALSE(fs::exists(file));
  std::error_code error;
  EXPECT_EQ(RemoveTree(scratch.Path("missing"), error), 0u);
  EXPECT_FALSE(error);
}

TEST(RemoveTreeTest, APathThatCannotBeReadIsAnErrorNamingIt) {
  ScratchFolder scratch;
  const std::string under_a_file = scratch.Write("file", "z") + "/inside";
  std::error_code error;
  EXPECT_EQ(RemoveTree(under_a_file, error), 0u);
  EXPECT_EQ(error, std::errc::not_a_directory);
  try {
    RemoveTree(under_a_file);
    ADD_FAILURE() << "no error";
  } catch (const fs::filesystem_error& e) {
    EXPECT_NE(std::string(e.what()).find("file/inside"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace conveyor
