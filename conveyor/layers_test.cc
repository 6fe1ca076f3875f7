// The dependency graph of the tree, checked against the layer table the build declares
// (CMakeLists.txt writes it to layers.txt: one line per layer, "NAME KIND DEPS...", KIND
// being pure, torch or tests; a DEP is a layer, or a third-party library as +NAME).
//
// Every `#include "conveyor/X/..."` in conveyor/L/ names an existing file of L itself or of
// a layer L declares (directly: what a layer uses is written down, not inherited). A pure
// layer includes the standard library and the system's C headers only; a torch layer may
// also include libtorch and the third-party libraries its row names; GoogleTest belongs to
// test files alone. Every folder under conveyor/ is a layer of the table; the table has no
// cycle, and neither have the concepts (a .h/.cc pair) inside one layer. The README's layer
// table is this table. Every file of the tree is in namespace conveyor, and none calls
// the standard remove_all (common/remove_tree.h says why).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
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
  std::set<std::string> deps;      // layers
  std::set<std::string> external;  // third-party libraries (+NAME in the table)
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
    for (std::string dep; fields >> dep;) {
      if (dep[0] == '+') {
        layer.external.insert(dep.substr(1));
      } else {
        layer.deps.insert(dep);
      }
    }
    table[name] = layer;
  }
  return table;
}

// The layers `name` uses, directly or through others.
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

bool IsTestFile(const fs::path& file) {
  const std::string stem = file.stem().string();
  return stem.ends_with("_test") || stem.ends_with("_testing");
}

// Where an angle-bracket include comes from: "std" (the C++ standard library, the C library
// and POSIX), "torch" (libtorch, c10d included), "gtest", a third-party library of the table
// (its name there) or "" when it is none of those.
std::string OriginOf(const std::string& target) {
  static const std::set<std::string> kStandard = {
      "algorithm", "any", "array", "atomic", "barrier", "bit", "bitset", "cassert", "cctype",
      "cerrno", "cfenv", "cfloat", "charconv", "chrono", "cinttypes", "climits", "clocale", "cmath",
      "compare", "complex", "concepts", "condition_variable", "coroutine", "csetjmp", "csignal",
      "cstdarg", "cstddef", "cstdint", "cstdio", "cstdlib", "cstring", "ctime", "cwchar", "cwctype",
      "deque", "exception", "execution", "expected", "filesystem", "format", "forward_list",
      "fstream", "functional", "future", "initializer_list", "iomanip", "ios", "iosfwd", "iostream",
      "istream", "iterator", "latch", "limits", "list", "locale", "map", "memory",
      "memory_resource", "mutex", "new", "numbers", "numeric", "optional", "ostream", "queue",
      "random", "ranges", "ratio", "regex", "semaphore", "set", "shared_mutex", "source_location",
      "span", "sstream", "stack", "stdexcept", "stop_token", "streambuf", "string", "string_view",
      "system_error", "thread", "tuple", "type_traits", "typeindex", "typeinfo", "unordered_map",
      "unordered_set", "utility", "valarray", "variant", "vector", "version",
      // C and POSIX
      "dirent.h", "dlfcn.h", "errno.h", "fcntl.h", "ftw.h", "ifaddrs.h", "netdb.h", "poll.h", "pthread.h",
      "sched.h", "signal.h", "stdio.h", "stdlib.h", "string.h", "time.h", "unistd.h"};
  if (kStandard.count(target)) return "std";
  static const std::regex kSystem(R"(^(sys|netinet|arpa|linux)/[a-z_]+\.h$)");
  if (std::regex_search(target, kSystem)) return "std";
  static const std::vector<std::pair<std::regex, std::string>> kLibraries = {
      {std::regex(R"(^(ATen|torch|c10|c10d|caffe2)/)"), "torch"},
      {std::regex(R"(^(gtest|gmock)/)"), "gtest"},
      {std::regex(R"(^gloo/)"), "gloo"},
      {std::regex(R"(^nlohmann/)"), "nlohmann_json"},
      {std::regex(R"(^toml\+\+/)"), "tomlplusplus"},
      {std::regex(R"(^CLI/)"), "CLI11"},
  };
  for (const auto& [pattern, origin] : kLibraries) {
    if (std::regex_search(target, pattern)) return origin;
  }
  return "";
}

// Every source file of a layer, with its includes.
std::map<fs::path, std::vector<Include>> SourcesOf(const fs::path& root, const std::string& name) {
  std::map<fs::path, std::vector<Include>> sources;
  for (const fs::directory_entry& entry :
       fs::recursive_directory_iterator(root / "conveyor" / name)) {
    if (entry.is_regular_file() && IsSource(entry.path())) {
      sources[entry.path()] = IncludesOf(root, entry.path());
    }
  }
  return sources;
}

class LayersTest : public ::testing::Test {
 protected:
  const fs::path root_ = CONVEYOR_SOURCE_DIR;
  const std::map<std::string, Layer> table_ = ReadTable();
};

TEST_F(LayersTest, TableIsReadAndNamesTheCoreLayers) {
  // Guards the check itself: an empty or unreadable table would let every include pass.
  for (const char* name : {"common", "schedule", "timeline", "sim", "module", "runtime", "nn",
                           "optim", "train", "cli", "e2e"}) {
    EXPECT_TRUE(table_.count(name)) << "layer " << name << " missing from " << CONVEYOR_LAYER_TABLE;
  }
  EXPECT_EQ(table_.at("common").kind, "pure");
  EXPECT_EQ(table_.at("runtime").kind, "torch");
  EXPECT_TRUE(table_.at("cli").external.count("CLI11")) << "cli's row is not its link line";
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
    if (layer.kind == "pure") {
      EXPECT_TRUE(layer.external.empty()) << "pure layer " << name << " links a library";
      for (const std::string& dep : layer.deps) {
        EXPECT_EQ(table_.at(dep).kind, "pure") << "pure layer " << name << " uses " << dep;
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
    ASSERT_TRUE(fs::is_directory(root_ / "conveyor" / name)) << name << " declared but missing";
    for (const auto& [file, includes] : SourcesOf(root_, name)) {
      const bool test_code = layer.kind == "tests" || IsTestFile(file);
      for (const Include& include : includes) {
        const std::string where = include.file + ":" + std::to_string(include.line) + ": ";
        ++checked;
        if (!include.quoted) {
          const std::string origin = OriginOf(include.target);
          if (origin == "std") continue;
          if (origin == "gtest") {
            EXPECT_TRUE(test_code) << where << "GoogleTest outside a test file";
          } else if (origin == "torch") {
            EXPECT_NE(layer.kind, "pure")
                << where << "pure layer " << name << " includes <" << include.target << ">";
          } else if (origin.empty()) {
            ADD_FAILURE() << where << "<" << include.target
                          << "> is neither the standard library nor a library of the table";
          } else {
            EXPECT_TRUE(layer.external.count(origin))
                << where << name << " includes <" << include.target << "> but does not link "
                << origin << " (declare it in CMakeLists.txt)";
          }
          continue;
        }
        static const std::regex kOwn(R"(^conveyor/([a-z0-9_]+)/)");
        std::smatch match;
        ASSERT_TRUE(std::regex_search(include.target, match, kOwn))
            << where << "quoted include \"" << include.target
            << "\" is not of the form conveyor/LAYER/...";
        const std::string target = match[1];
        EXPECT_TRUE(target == name || layer.deps.count(target))
            << where << name << " includes " << include.target << " but does not declare layer "
            << target << " among its dependencies in CMakeLists.txt";
        EXPECT_TRUE(fs::is_regular_file(root_ / include.target))
            << where << include.target << " does not exist";
      }
    }
  }
  EXPECT_GT(checked, 1000) << "suspiciously few includes checked: is the tree where it was?";
}

TEST_F(LayersTest, ConceptsOfOneLayerIncludeNoCycle) {
  // A concept is a .h/.cc pair: foo.h and foo.cc are one node, foo_test.cc another.
  int concepts = 0;
  for (const auto& [name, layer] : table_) {
    std::map<std::string, std::set<std::string>> uses;  // concept -> concepts of this layer
    for (const auto& [file, includes] : SourcesOf(root_, name)) {
      const std::string self = fs::relative(file, root_).replace_extension().string();
      uses[self];
      for (const Include& include : includes) {
        if (!include.quoted || !include.target.starts_with("conveyor/" + name + "/")) continue;
        const std::string other = fs::path(include.target).replace_extension().string();
        if (other != self) uses[self].insert(other);
      }
    }
    concepts += static_cast<int>(uses.size());
    // Depth-first search; a concept reached again while on the path closes a cycle.
    std::map<std::string, int> state;  // 1: on the path, 2: done
    std::vector<std::string> path;
    std::function<void(const std::string&)> visit = [&](const std::string& at) {
      state[at] = 1;
      path.push_back(at);
      for (const std::string& next : uses[at]) {
        if (state[next] == 1) {
          std::string cycle;
          for (auto it = std::find(path.begin(), path.end(), next); it != path.end(); ++it) {
            cycle += *it + " -> ";
          }
          ADD_FAILURE() << "include cycle in layer " << name << ": " << cycle << next;
        } else if (state[next] == 0) {
          visit(next);
        }
      }
      path.pop_back();
      state[at] = 2;
    };
    for (const auto& [concept_name, unused] : uses) {
      if (state[concept_name] == 0) visit(concept_name);
    }
  }
  EXPECT_GT(concepts, 200) << "suspiciously few concepts: is the tree where it was?";
}

// The README's layer table ("| layer | uses | kind |") lists the layers of the build's table,
// each with the layers it declares and its kind.
TEST_F(LayersTest, ReadmeTableIsTheBuildsTable) {
  std::ifstream in(root_ / "README.md");
  ASSERT_TRUE(in) << "cannot read README.md";
  static const std::regex kRow(R"(^\|\s*([a-z0-9_]+)\s*\|([^|]*)\|\s*([a-z ]+?)\s*\|\s*$)");
  std::map<std::string, Layer> readme;
  std::string text;
  while (std::getline(in, text)) {
    std::smatch match;
    if (!std::regex_search(text, match, kRow) || match[1] == "layer") continue;
    Layer layer;
    layer.kind = match[3] == "tests only" ? "tests" : std::string(match[3]);
    static const std::regex kName(R"([a-z0-9_]+)");
    const std::string uses = match[2];
    for (auto it = std::sregex_iterator(uses.begin(), uses.end(), kName);
         it != std::sregex_iterator(); ++it) {
      layer.deps.insert(it->str());
    }
    readme[match[1]] = layer;
  }
  ASSERT_FALSE(readme.empty()) << "README.md has no layer table";
  for (const auto& [name, layer] : table_) {
    const auto it = readme.find(name);
    if (it == readme.end()) {
      ADD_FAILURE() << "README.md's layer table lacks " << name;
      continue;
    }
    EXPECT_EQ(it->second.kind, layer.kind) << "README.md: kind of " << name;
    EXPECT_EQ(it->second.deps, layer.deps) << "README.md: what " << name << " uses";
  }
  for (const auto& [name, layer] : readme) {
    EXPECT_TRUE(table_.count(name))
        << "README.md lists " << name << ", the build has no such layer";
  }
}

// Calls check(where, text) for every line of every source file under root/folder for each
// of `folders` ("conveyor/x/y.cc:12"); returns how many files it read.
int ForEachSourceLine(const fs::path& root, std::initializer_list<const char*> folders,
                      const std::function<void(const std::string&, const std::string&)>& check) {
  int files = 0;
  for (const char* folder : folders) {
    if (!fs::exists(root / folder)) continue;
    for (const fs::directory_entry& entry : fs::recursive_directory_iterator(root / folder)) {
      if (!entry.is_regular_file() || !IsSource(entry.path())) continue;
      ++files;
      std::ifstream in(entry.path());
      std::string text;
      for (int line = 1; std::getline(in, text); ++line) {
        check(fs::relative(entry.path(), root).string() + ":" + std::to_string(line), text);
      }
    }
  }
  return files;
}

// One namespace for the whole tree: every named namespace a file opens is `conveyor`, or
// `internal` inside it for a header's implementation details (test support included; a
// `conveyor::testing` would shadow GoogleTest's).
TEST_F(LayersTest, EveryFileIsInTheOneNamespace) {
  static const std::regex kOpen(R"(^\s*namespace\s+([A-Za-z_:]+)\s*\{)");
  const int files =
      ForEachSourceLine(root_, {"conveyor"}, [](const std::string& where, const std::string& text) {
        std::smatch match;
        if (!std::regex_search(text, match, kOpen)) return;
        const std::string name = match[1];
        EXPECT_TRUE(name == "conveyor" || name == "internal" || name == "conveyor::internal")
            << where << ": namespace " << name << " (everything lives in namespace conveyor)";
      });
  EXPECT_GT(files, 300) << "suspiciously few files checked: is the tree where it was?";
}

// A pip PyTorch's libtorch carries a copy of std::filesystem::remove_all that crashes on a
// non-empty folder (conveyor/common/remove_tree.h): folders are removed by RemoveTree only.
TEST_F(LayersTest, NoFileCallsTheStandardRemoveAll) {
  static const std::regex kCall(R"((std::filesystem|fs)::remove_all\s*\()");
  const int files = ForEachSourceLine(root_, {"conveyor", "plugins", "bench"},
                                      [](const std::string& where, const std::string& text) {
                                        EXPECT_FALSE(std::regex_search(text, kCall))
                                            << where << ": " << text
                                            << " (use RemoveTree of conveyor/common/remove_tree.h)";
                                      });
  EXPECT_GT(files, 300) << "suspiciously few files checked: is the tree where it was?";
}

}  // namespace
}  // namespace conveyor
