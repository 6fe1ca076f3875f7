#include "conveyor/data/corpus.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "conveyor/common/error.h"
#include "conveyor/common/scratch_folder_testing.h"
#include "conveyor/data/data_testing.h"

namespace conveyor {
namespace {

std::vector<std::string> CategoriesOfDocuments(const Corpus& corpus) {
  std::vector<std::string> names;
  for (const Document& d : corpus.documents) names.push_back(corpus.categories[d.category]);
  return names;
}

// Runs `load` and expects a UserError whose message contains `fragment`.
template <typename Load>
void ExpectUserError(Load load, const std::string& fragment) {
  try {
    load();
    ADD_FAILURE() << "no UserError; expected one mentioning " << fragment;
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(SplitFortunesTest, SplitsOnPercentLinesOnly) {
  const std::string content =
      "First line\nsecond line\n%\n100% sure\n%%\n %\n%\n\n  \n%\nLast, no newline";
  EXPECT_EQ(SplitFortunes(content), (std::vector<std::string>{
                                        "First line\nsecond line",
                                        "100% sure\n%%\n %",
                                        "Last, no newline",
                                    }));
}

TEST(SplitFortunesTest, TrailingSeparatorAndBlankContentGiveNothingExtra) {
  EXPECT_EQ(SplitFortunes("one\n%\ntwo\n%\n"), (std::vector<std::string>{"one", "two"}));
  EXPECT_EQ(SplitFortunes("  indented\n\ttab\n\n%"),
            (std::vector<std::string>{"  indented\n\ttab\n"}));
  EXPECT_TRUE(SplitFortunes("").empty());
  EXPECT_TRUE(SplitFortunes("%\n%\n \n%\n").empty());
}

TEST(LoadFortunesTest, OneCategoryPerFortuneFileSkippingIndexesLinksAndFolders) {
  ScratchFolder dir;
  dir.Write("zoo", "z1\n%\nz2\n%\nz3\n");
  dir.Write("apes", "a1\n%\na2\n");
  dir.Write("apes.dat", std::string("\0\0\0\2binary index", 16));
  dir.Write("off/rude", "r1\n%\nr2\n");
  std::filesystem::create_symlink("apes", dir.path() + "/apes.u8");
  std::filesystem::create_symlink("zoo", dir.path() + "/zoolink");

  const Corpus corpus = LoadFortunes(dir.path());
  EXPECT_EQ(corpus.source, dir.path());
  EXPECT_EQ(corpus.categories, (std::vector<std::string>{"apes", "zoo"}));
  EXPECT_EQ(CategoriesOfDocuments(corpus),
            (std::vector<std::string>{"apes", "apes", "zoo", "zoo", "zoo"}));
  EXPECT_EQ(corpus.documents[0].text, "a1");
  EXPECT_EQ(corpus.documents[4].text, "z3");
  EXPECT_EQ(corpus.DocumentsPerCategory(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(corpus.TotalBytes(), 10);
}

TEST(LoadFortunesTest, MissingOrEmptyDirectoryIsAUserErrorNamingThePath) {
  ScratchFolder dir;
  ExpectUserError([&] { LoadFortunes(dir.path() + "/nope"); }, dir.path() + "/nope");
  ExpectUserError([&] { LoadFortunes(dir.path()); }, "no text documents in " + dir.path());
  dir.Write("blank", "%\n   \n%\n");
  ExpectUserError([&] { LoadFortunes(dir.path()); }, dir.path());
  const std::string file = dir.Write("notadir/f", "x");
  ExpectUserError([&] { LoadFortunes(file); },
                  "--data fortunes: " + file + ": is a file, expected a directory");
}

TEST(LoadTextPathTest, SingleFileIsOneDocument) {
  ScratchFolder dir;
  const std::string file = dir.Write("poem.txt", "roses\n%\nviolets\n");
  const Corpus corpus = LoadTextPath(file);
  EXPECT_EQ(corpus.categories, (std::vector<std::string>{"poem.txt"}));
  ASSERT_EQ(corpus.documents.size(), 1u);
  EXPECT_EQ(corpus.documents[0].text, "roses\n%\nviolets\n");  // kept byte for byte
}

TEST(LoadTextPathTest, DirectoryRecursiveSortedSkippingHiddenBinaryAndEmpty) {
  ScratchFolder dir;
  dir.Write("b.txt", "bee");
  dir.Write("sub/deeper/a.txt", "deep a");
  dir.Write("sub/b.txt", "sub bee");
  dir.Write("a.txt", "top a");
  dir.Write("empty.txt", "\n  \n");
  dir.Write("image.png", std::string("\x89PNG\0\0", 6));
  dir.Write(".hidden", "secret");
  dir.Write(".git/config", "[core]");
  // Links that name no file: skipped, as a device would be.
  std::filesystem::create_symlink(dir.Path("loop2"), dir.Path("loop1"));
  std::filesystem::create_symlink(dir.Path("loop1"), dir.Path("loop2"));
  std::filesystem::create_symlink(dir.Path("nothing"), dir.Path("sub/dangling"));

  const Corpus corpus = LoadTextPath(dir.path());
  EXPECT_EQ(corpus.categories, (std::vector<std::string>{"a.txt", "b.txt"}));
  std::vector<std::string> texts;
  for (const Document& d : corpus.documents) texts.push_back(d.text);
  EXPECT_EQ(texts, (std::vector<std::string>{"top a", "deep a", "bee", "sub bee"}));
  EXPECT_EQ(CategoriesOfDocuments(corpus),
            (std::vector<std::string>{"a.txt", "a.txt", "b.txt", "b.txt"}));
}

TEST(LoadTextPathTest, ErrorsNameThePath) {
  ScratchFolder dir;
  ExpectUserError([&] { LoadTextPath(dir.path() + "/missing.txt"); },
                  "--data " + dir.path() + "/missing.txt: does not exist");
  ExpectUserError([&] { LoadTextPath(dir.path()); }, "no text documents in " + dir.path());
  std::filesystem::create_symlink(dir.Path("loop"), dir.Path("loop"));
  ExpectUserError([&] { LoadTextPath(dir.Path("loop")); },
                  "--data " + dir.Path("loop") + ": its symbolic links loop");
  const std::string binary = dir.Write("blob.bin", std::string("ab\0cd", 5));
  ExpectUserError([&] { LoadTextPath(binary); }, binary + " looks binary");
  ExpectUserError([&] { LoadTextPath(dir.path()); }, "no text documents");
  const std::string blank = dir.Write("blank.txt", " \n");
  ExpectUserError([&] { LoadTextPath(blank); }, "no text documents in " + blank);
}

TEST(RealFortunesTest, DebianCollectionLoads) {
  if (!FortunesInstalled()) {
    GTEST_SKIP() << kFortunesDir << " is absent: install the Debian package `fortunes`";
  }
  const Corpus corpus = LoadFortunes();
  const std::vector<int64_t> sizes = corpus.DocumentsPerCategory();
  std::cout << "fortunes: " << corpus.documents.size() << " documents, " << corpus.categories.size()
            << " categories, " << corpus.TotalBytes() << " bytes\n";
  EXPECT_GE(corpus.categories.size(), 20u);
  EXPECT_GE(corpus.documents.size(), 3000u);
  EXPECT_GE(corpus.TotalBytes(), 1000000);
  for (const std::string& name : corpus.categories) {
    EXPECT_FALSE(name.ends_with(".dat") || name.ends_with(".u8")) << name;
  }
  for (int64_t size : sizes) EXPECT_GT(size, 0);
  for (const Document& d : corpus.documents) {
    ASSERT_FALSE(d.text.empty());
    ASSERT_EQ(d.text.find("\n%\n"), std::string::npos) << d.text;
  }
  EXPECT_TRUE(
      std::is_sorted(corpus.documents.begin(), corpus.documents.end(),
                     [](const Document& a, const Document& b) { return a.category < b.category; }));
}

}  // namespace
}  // namespace conveyor
