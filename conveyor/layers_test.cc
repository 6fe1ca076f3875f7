// The dependency graph of the tree, checked against the layer table the build declares
// (CMakeLists.txt writes it to layers.txt: one line per layer, "NAME KIND DEPS...", KIND
// being pure, torch or tests).
//
// Every `#include "conveyor/X/..."` in conveyor/L/ must name an existing file of L itself or
// of a layer L depends on, directly or through others; a pure layer includes no torch, c10
// or Gloo header; every folder under conveyor/ is a layer of the table; the table has no
// cycle. A new edge is made by declaring it in CMakeLists.txt, never by an include alone.
// Every file of the tree is in namespace conveyor.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace conveyor {
namespace {

namespace fs = std::filesystem;

struct Layer {
  std::string kind;
  std::vector<std::string> deps;
};

std::map<std::string, Layer> ReadTable() {
  std::ifstream in(CONVEYOR_LAYER_TABLE);
  EXPECT_TRUE(in) << "cannot read " << CONVEYOR_LAYER_TABLE;
  std::map<std::string, Layer> table;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string name;
    Layer layer;
    if (!(fields >> name >> layer.kind)) continue;
    for (std::string dep; fields >> dep;) layer.deps.push_back(dep);
    table[name] = layer;
  }
  return table;
}

// The layers `name` may use: its dependencies and theirs.
std::set<std::string> Closure(const std::map<std::string, Layer>& table, const std::string& name) {
  std::set<std::string> reach;
  std::vector<std::string> todo = {name};
  while (!todo.empty()) {
    const auto it = table.find(todo.back());
    todo.pop_back();
    if (it == table.end()) continue;
    for (const std::string& dep : it->second.deps) {
      if (reach.insert(dep).second) todo.push_back(dep);
    }
  }
  return reach;
}

struct Include {
  std::string file;  // relative to the source root
  int line;
  std::string target;  // what the directive names
  bool quoted;         // "..." rather than <...>
};

std::vector<Include> IncludesOf(const fs::path& root, const fs::path& file) {
  static const std::regex kDirective(R"(^\s*#\s*include\s*([<"])([^>"]+)[>"])");
  std::vector<Include> found;
  std::ifstream in(file);
  std::string text;
  int line = 0;
  while (std::getline(in, text)) {
    ++line;
    std::smatch match;
    if (std::regex_search(text, match, kDirective)) {
      found.push_back({fs::relative(file, root).string(), line, match[2], match[1] == "\""});
    }
  }
  return found;
}

bool IsSource(const fs::path& file) {
  return file.extension() == ".h" || file.extension() == ".cc";
}

class LayersTest : public ::testing::Test {
 protected:
  const fs::path root_ = CONVEYOR_SOURCE_DIR;
  const std::map<std::string, Layer> table_ = ReadTable();
};

TEST_F(LayersTest, TableIsReadAndNamesTheCoreLayers) {
  // Guards the check itself: an empty or unreadable table would let every include pass.
  for (const char* name : {"common", "schedule", "timeline", "sim", "module", "runtime", "nn",
                           "train", "cli", "e2e"}) {
    EXPECT_TRUE(table_.count(name)) << "layer " << name << " missing from " << CONVEYOR_LAYER_TABLE;
  }
  EXPECT_EQ(table_.at("common").kind, "pure");
  EXPECT_EQ(table_.at("runtime").kind, "torch");
}

TEST_F(LayersTest, EveryFolderIsALayer) {
  for (const fs::directory_entry& entry : fs::directory_iterator(root_ / "conveyor")) {
    if (!entry.is_directory()) continue;
    const std::string name = entry.path().filename().string();
    EXPECT_TRUE(table_.count(name))
        << "conveyor/" << name << "/ is not declared as a layer in CMakeLists.txt";
  }
}

TEST_F(LayersTest, EveryDeclaredDependencyIsALayer) {
  for (const auto& [name, layer] : table_) {
    for (const std::string& dep : layer.deps) {
      EXPECT_TRUE(table_.count(dep)) << name << " depends on undeclared layer " << dep;
      if (table_.count(dep)) {
        EXPECT_NE(table_.at(dep).kind, "tests") << name << " depends on tests-only " << dep;
      }
    }
  }
}

TEST_F(LayersTest, TableHasNoCycle) {
  for (const auto& [name, layer] : table_) {
    EXPECT_FALSE(Closure(table_, name).count(name)) << "layer " << name << " depends on itself";
  }
}

TEST_F(LayersTest, IncludesFollowTheTable) {
  int checked = 0;
  for (const auto& [name, layer] : table_) {
    const std::set<std::string> allowed = Closure(table_, name);
    const fs::path folder = root_ / "conveyor" / name;
    ASSERT_TRUE(fs::is_directory(folder)) << folder << " declared but missing";
    for (const fs::directory_entry& entry : fs::recursive_directory_iterator(folder)) {
      if (!entry.is_regular_file() || !IsSource(entry.path())) continue;
      for (const Include& include : IncludesOf(root_, entry.path())) {
        const std::string where = include.file + ":" + std::to_string(include.line) + ": ";
        if (!include.quoted) {
          if (layer.kind == "pure") {
            static const std::regex kTorch(R"(^(ATen|torch|c10|c10d|gloo|caffe2)/)");
            EXPECT_FALSE(std::regex_search(include.target, kTorch))
                << where << "pure layer " << name << " includes <" << include.target << ">";
          }
          continue;
        }
        ++checked;
        static const std::regex kOwn(R"(^conveyor/([a-z0-9_]+)/)");
        std::smatch match;
        ASSERT_TRUE(std::regex_search(include.target, match, kOwn))
            << where << "quoted include \"" << include.target
            << "\" is not of the form conveyor/LAYER/...";
        const std::string target = match[1];
        EXPECT_TRUE(target == name || allowed.count(target))
            << where << name << " may not include " << include.target << " (layer " << target
            << " is not among its dependencies in CMakeLists.txt)";
        EXPECT_TRUE(fs::is_regular_file(root_ / include.target))
            << where << include.target << " does not exist";
      }
    }
  }
  EXPECT_GT(checked, 300) << "suspiciously few includes checked: is the tree where it was?";
}

// One namespace for the whole tree: every named namespace a file opens is `conveyor`, or
// `internal` inside it for a header's implementation details (test support included; a
// `conveyor::testing` would shadow GoogleTest's).
TEST_F(LayersTest, EveryFileIsInTheOneNamespace) {
  static const std::regex kOpen(R"(^\s*namespace\s+([A-Za-z_:]+)\s*\{)");
  int files = 0;
  for (const fs::directory_entry& entry : fs::recursive_directory_iterator(root_ / "conveyor")) {
    if (!entry.is_regular_file() || !IsSource(entry.path())) continue;
    ++files;
    std::ifstream in(entry.path());
    std::string text;
    int line = 0;
    while (std::getline(in, text)) {
      ++line;
      std::smatch match;
      if (!std::regex_search(text, match, kOpen)) continue;
      const std::string name = match[1];
      EXPECT_TRUE(name == "conveyor" || name == "internal" || name == "conveyor::internal")
          << fs::relative(entry.path(), root_).string() << ":" << line << ": namespace " << name
          << " (everything lives in namespace conveyor)";
    }
  }
  EXPECT_GT(files, 300) << "suspiciously few files checked: is the tree where it was?";
}

}  // namespace
}  // namespace conveyor
