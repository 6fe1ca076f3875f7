#include "conveyor/common/file_fingerprint.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include "conveyor/common/checksum.h"

namespace conveyor {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kSampleBytes = 64 << 10;
constexpr int64_t kSamples = 64;

// Folds the bytes of `count` values at `data` into `hash`.
template <typename T>
void Mix(uint64_t& hash, const T* data, size_t count) {
  hash = (hash ^ Fnv1a64(data, count * sizeof(T))) * 0x100000001b3ULL;
}

// The file's name, size and samples folded into `hash`; false when it cannot be read.
bool MixFile(uint64_t& hash, const fs::path& file, const std::string& name) {
  std::error_code error;
  const auto size = static_cast<int64_t>(fs::file_size(file, error));
  if (error) return false;
  std::ifstream in(file, std::ios::binary);
  if (!in) return false;
  Mix(hash, name.data(), name.size());
  Mix(hash, &size, 1);
  std::vector<char> buffer(kSampleBytes);
  const bool whole = size <= kSampleBytes * kSamples;
  const int64_t samples = whole ? (size + kSampleBytes - 1) / kSampleBytes : kSamples;
  for (int64_t s = 0; s < samples; ++s) {
    // Evenly spread from the start to the last full sample, both included.
    const int64_t at = whole ? s * kSampleBytes : s * (size - kSampleBytes) / (kSamples - 1);
    const int64_t count = std::min(kSampleBytes, size - at);
    in.seekg(at);
    if (!in.read(buffer.data(), count)) return false;
    Mix(hash, buffer.data(), static_cast<size_t>(count));
  }
  return true;
}

}  // namespace

std::string FileFingerprint(const std::string& path) {
  std::error_code error;
  const fs::path root(path);
  std::vector<std::pair<std::string, fs::path>> files;  // (name, where)
  if (fs::is_regular_file(root, error)) {
    files.emplace_back("", root);
  } else if (fs::is_directory(root, error)) {
    for (fs::recursive_directory_iterator it(root, error), end; !error && it != end;
         it.increment(error)) {
      if (it->is_regular_file(error)) {
        files.emplace_back(fs::relative(it->path(), root, error).string(), it->path());
      }
    }
    if (error) return "unreadable";
  } else {
    const fs::path folder = root.has_parent_path() ? root.parent_path() : fs::path(".");
    const std::string stem = root.filename().string() + ".";
    for (fs::directory_iterator it(folder, error), end; !error && it != end; it.increment(error)) {
      const std::string name = it->path().filename().string();
      if (name.starts_with(stem) && it->is_regular_file(error))
        files.emplace_back(name, it->path());
    }
  }
  if (files.empty()) return "none";
  std::sort(files.begin(), files.end());
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const auto& [name, where] : files) {
    if (!MixFile(hash, where, name)) return "unreadable";
  }
  return Hex64(hash);
}

}  // namespace conveyor
