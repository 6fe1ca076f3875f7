#include "conveyor/formats/safetensors.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>
#include <vector>

#include "conveyor/common/atomic_file.h"
#include "conveyor/common/error.h"

namespace conveyor {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swaps");

using Json = nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;  // as the reference implementation
constexpr char kMetadataKey[] = "__metadata__";

struct Dtype {
  const char* name;
  at::ScalarType type;
};

constexpr Dtype kDtypes[] = {{"F64", at::kDouble},    {"F32", at::kFloat}, {"F16", at::kHalf},
                             {"BF16", at::kBFloat16}, {"I64", at::kLong},  {"I32", at::kInt},
                             {"I16", at::kShort},     {"I8", at::kChar},   {"U8", at::kByte},
                             {"BOOL", at::kBool}};

std::string SupportedDtypes() {
  std::string names;
  for (const Dtype& d : kDtypes) names += (names.empty() ? "" : " ") + std::string(d.name);
  return names;
}

std::string Where(const std::string& path) { return "safetensors file '" + path + "': "; }

// One tensor of a header, checked against its own fields only.
struct Entry {
  std::string name;
  const Dtype* dtype;
  std::vector<int64_t> shape;
  uint64_t begin, end;  // within the data section
};

bool IsSize(const Json& j) { return j.is_number_unsigned(); }

std::vector<uint64_t> Sizes(const Json& j, const char* field, const std::string& at) {
  CONVEYOR_CHECK(j.is_array() && std::all_of(j.begin(), j.end(), IsSize))
      << at << "\"" << field << "\" must be an array of non-negative integers, got " << j.dump();
  return j.get<std::vector<uint64_t>>();
}

Entry ParseEntry(const std::string& name, const Json& j, const std::string& where) {
  const std::string at = where + "tensor '" + name + "': ";
  CONVEYOR_CHECK(j.is_object()) << at << "entry must be a JSON object, got " << j.dump();
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    CONVEYOR_CHECK(j.contains(field)) << at << "missing \"" << field << "\"";
  }
  Entry e;
  e.name = name;
  const Json& dtype = j["dtype"];
  const Dtype* found = nullptr;
  for (const Dtype& d : kDtypes) {
    if (dtype.is_string() && dtype.get<std::string>() == d.name) found = &d;
  }
  CONVEYOR_CHECK(found != nullptr) << at << "unknown or unsupported dtype " << dtype.dump()
                                   << " (supported: " << SupportedDtypes() << ")";
  e.dtype = found;
  uint64_t bytes = at::elementSize(found->type);
  // The dimensions' product with zeros counted as ones: a tensor's strides, which must fit
  // in int64_t even when the tensor is empty (so must each dimension).
  uint64_t extent = 1;
  for (uint64_t dim : Sizes(j["shape"], "shape", at)) {
    CONVEYOR_CHECK(!__builtin_mul_overflow(bytes, dim, &bytes) &&
                   !__builtin_mul_overflow(extent, std::max<uint64_t>(dim, 1), &extent) &&
                   extent <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        << at << "shape " << j["shape"].dump() << " is too large";
    e.shape.push_back(static_cast<int64_t>(dim));
  }
  const std::vector<uint64_t> offsets = Sizes(j["data_offsets"], "data_offsets", at);
  CONVEYOR_CHECK(offsets.size() == 2 && offsets[0] <= offsets[1])
      << at << "\"data_offsets\" must be [begin, end] with begin <= end, got "
      << j["data_offsets"].dump();
  e.begin = offsets[0];
  e.end = offsets[1];
  CONVEYOR_CHECK(e.end - e.begin == bytes)
      << at << "dtype " << found->name << " and shape " << j["shape"].dump() << " need " << bytes
      << " bytes, but data_offsets " << j["data_offsets"].dump() << " hold " << e.end - e.begin;
  return e;
}

// The data section [0, data_bytes) must be exactly the union of the entries' disjoint ranges.
void CheckLayout(std::vector<Entry>& entries, uint64_t data_bytes, const std::string& where) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  uint64_t covered = 0;
  const Entry* previous = nullptr;
  for (const Entry& e : entries) {
    CONVEYOR_CHECK(e.end <= data_bytes)
        << where << "tensor '" << e.name << "' has data_offsets [" << e.begin << ", " << e.end
        << "] past the end of the data section (" << data_bytes << " bytes): truncated file?";
    CONVEYOR_CHECK(e.begin >= covered) << where << "tensors '" << previous->name << "' and '"
                                       << e.name << "' have overlapping data_offsets";
    CONVEYOR_CHECK(e.begin == covered)
        << where << "data bytes [" << covered << ", " << e.begin << ") belong to no tensor";
    covered = e.end;
    previous = &e;
  }
  CONVEYOR_CHECK(covered == data_bytes)
      << where << data_bytes - covered << " trailing bytes after the last tensor's data";
}

// Parses the header, refusing a name that appears twice (JSON parsers keep only one).
Json ParseHeader(const std::string& text, const std::string& where) {
  std::set<std::string> names;
  auto no_duplicates = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (depth == 1 && event == Json::parse_event_t::key) {
      CONVEYOR_CHECK(names.insert(parsed.get<std::string>()).second)
          << where << "the header names " << parsed.dump() << " twice";
    }
    return true;
  };
  Json header;
  try {
    header = Json::parse(text, no_duplicates);
  } catch (const Json::exception& e) {
    CONVEYOR_CHECK(false) << where << "the header is not valid JSON: " << e.what();
  }
  CONVEYOR_CHECK(header.is_object()) << where << "the header must be a JSON object";
  return header;
}

std::map<std::string, std::string> ParseMetadata(const Json& j, const std::string& where) {
  auto is_string = [](const Json& v) { return v.is_string(); };
  CONVEYOR_CHECK(j.is_object() && std::all_of(j.begin(), j.end(), is_string))
      << where << "\"" << kMetadataKey << "\" must map strings to strings, got " << j.dump();
  return j.get<std::map<std::string, std::string>>();
}

void ReadExactly(std::ifstream& in, uint64_t offset, void* data, uint64_t bytes,
                 const std::string& what) {
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(static_cast<char*>(data), static_cast<std::streamsize>(bytes));
  CONVEYOR_CHECK(in.good()) << what << "could not read " << bytes << " bytes at offset " << offset
                            << ": " << std::strerror(errno);
}

// An open file whose header was read and checked.
struct ParsedFile {
  std::ifstream in;
  std::vector<Entry> entries;  // in data order
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;
};

ParsedFile Parse(const std::string& path) {
  const std::string where = Where(path);
  std::error_code error;
  const uint64_t file_bytes = std::filesystem::file_size(path, error);
  CONVEYOR_CHECK(!error) << where << "cannot read: " << error.message();
  ParsedFile file;
  file.in.open(path, std::ios::binary);
  CONVEYOR_CHECK(file.in) << where << "cannot open: " << std::strerror(errno);
  CONVEYOR_CHECK(file_bytes >= 8) << where << "truncated: " << file_bytes
                                  << " bytes, too short for the 8-byte header length";
  uint8_t length[8];
  ReadExactly(file.in, 0, length, 8, where);
  uint64_t header_bytes = 0;
  for (int i = 0; i < 8; ++i) header_bytes |= uint64_t{length[i]} << (8 * i);
  CONVEYOR_CHECK(header_bytes <= file_bytes - 8)
      << where << "header length " << header_bytes << " runs past the end of the file ("
      << file_bytes << " bytes)";
  CONVEYOR_CHECK(header_bytes <= kMaxHeaderBytes)
      << where << "header length " << header_bytes << " exceeds the limit of " << kMaxHeaderBytes;
  std::string text(header_bytes, '\0');
  ReadExactly(file.in, 8, text.data(), header_bytes, where);

  const Json header = ParseHeader(text, where);
  for (const auto& [name, value] : header.items()) {
    if (name == kMetadataKey) {
      file.metadata = ParseMetadata(value, where);
    } else {
      file.entries.push_back(ParseEntry(name, value, where));
    }
  }
  file.data_start = 8 + header_bytes;
  CheckLayout(file.entries, file_bytes - file.data_start, where);
  return file;
}

// The tensor of entry `e` of `file`, read from its bytes alone.
at::Tensor ReadEntry(ParsedFile& file, const Entry& e, const std::string& path) {
  const std::string where = Where(path);
  at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(e.dtype->type));
  ReadExactly(file.in, file.data_start + e.begin, t.data_ptr(), e.end - e.begin,
              where + "tensor '" + e.name + "': ");
  CONVEYOR_CHECK(e.dtype->type != at::kBool || !t.view(at::kByte).gt(1).any().item<bool>())
      << where << "tensor '" << e.name << "' of dtype BOOL holds bytes other than 0 and 1";
  return t;
}

SafetensorsHeader HeaderOf(const ParsedFile& file) {
  SafetensorsHeader result;
  result.metadata = file.metadata;
  for (const Entry& e : file.entries) {
    result.tensors.emplace(e.name, SafetensorsEntry{e.dtype->name, e.dtype->type, e.shape});
  }
  return result;
}

}  // namespace

void SaveSafetensors(const std::string& path, const std::map<std::string, at::Tensor>& tensors,
                     const std::map<std::string, std::string>& metadata) {
  std::vector<at::Tensor> data;
  Json header = Json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    CONVEYOR_CHECK(!name.empty() && name != kMetadataKey)
        << Where(path) << "a tensor cannot be named '" << name << "'";
    CONVEYOR_CHECK(tensor.defined()) << Where(path) << "tensor '" << name << "' is undefined";
    const Dtype* dtype = nullptr;
    for (const Dtype& d : kDtypes) {
      if (d.type == tensor.scalar_type()) dtype = &d;
    }
    CONVEYOR_CHECK(dtype != nullptr) << Where(path) << "tensor '" << name << "' has dtype "
                                     << tensor.scalar_type() << ", which safetensors cannot hold "
                                     << "here (supported: " << SupportedDtypes() << ")";
    data.push_back(tensor.detach().to(at::kCPU).contiguous());
    const uint64_t bytes = data.back().nbytes();
    header[name] = {{"dtype", dtype->name},
                    {"shape", tensor.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const Json::exception& e) {
    CONVEYOR_CHECK(false) << Where(path) << "names and metadata must be UTF-8: " << e.what();
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(uint64_t{text.size()} >> (8 * i));

  AtomicFile file(path);
  file.Write(length, sizeof(length));
  file.Write(text.data(), text.size());
  for (const at::Tensor& t : data) file.Write(t.data_ptr(), t.nbytes());
  file.Commit();
}

SafetensorsFile LoadSafetensors(const std::string& path) {
  ParsedFile file = Parse(path);
  SafetensorsFile result;
  result.metadata = std::move(file.metadata);
  for (const Entry& e : file.entries) result.tensors.emplace(e.name, ReadEntry(file, e, path));
  return result;
}

int64_t NonFiniteCount(const at::Tensor& t) {
  if (!at::isFloatingType(t.scalar_type())) return 0;
  return at::isfinite(t).logical_not_().sum().item<int64_t>();
}

SafetensorsHeader LoadSafetensorsHeader(const std::string& path) { return HeaderOf(Parse(path)); }

struct SafetensorsReader::File {
  ParsedFile parsed;
  std::map<std::string, const Entry*> by_name;
};

SafetensorsReader::SafetensorsReader(const std::string& path)
    : path_(path), file_(std::make_unique<File>(File{Parse(path), {}})) {
  header_ = HeaderOf(file_->parsed);
  for (const Entry& e : file_->parsed.entries) file_->by_name.emplace(e.name, &e);
}

SafetensorsReader::~SafetensorsReader() = default;
SafetensorsReader::SafetensorsReader(SafetensorsReader&&) noexcept = default;
SafetensorsReader& SafetensorsReader::operator=(SafetensorsReader&&) noexcept = default;

at::Tensor SafetensorsReader::Read(const std::string& name) {
  const auto it = file_->by_name.find(name);
  CONVEYOR_CHECK(it != file_->by_name.end()) << Where(path_) << "has no tensor '" << name << "'";
  bytes_read_ += it->second->end - it->second->begin;
  return ReadEntry(file_->parsed, *it->second, path_);
}

void SafetensorsReader::ReadBytes(const std::string& name, uint64_t begin, uint64_t length,
                                  void* out) {
  const auto it = file_->by_name.find(name);
  CONVEYOR_CHECK(it != file_->by_name.end()) << Where(path_) << "has no tensor '" << name << "'";
  const Entry& e = *it->second;
  const std::string where = Where(path_) + "tensor '" + name + "': ";
  CONVEYOR_CHECK(begin <= e.end - e.begin && length <= e.end - e.begin - begin)
      << where << "bytes [" << begin << ", " << begin + length << ") are outside its "
      << e.end - e.begin;
  CONVEYOR_CHECK(e.dtype->type != at::kBool) << where << "BOOL tensors are read whole";
  ReadExactly(file_->parsed.in, file_->parsed.data_start + e.begin + begin, out, length, where);
  bytes_read_ += length;
}

}  // namespace conveyor
