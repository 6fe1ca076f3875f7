#include "conveyor/formats/checkpoint_files.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>

#include "conveyor/common/checksum.h"
#include "conveyor/common/error.h"

namespace conveyor {
namespace fs = std::filesystem;
using Json = nlohmann::json;
namespace {

constexpr char kFormat[] = "conveyor-checkpoint-4";
// One checksum of each whole tensor ("fnv1a64"), no chunks: read whole, checked whole.
constexpr char kFormatWithWholeChecksums[] = "conveyor-checkpoint-3";
// As -3, and its manifest has no checksum of the tokenizer: read, the tokenizer unverified.
constexpr char kFormatWithoutTokenizerChecksum[] = "conveyor-checkpoint-2";
constexpr char kFormatWithoutChecksums[] = "conveyor-checkpoint-1";
// The one dtype a checkpoint stores: the fp32 master weights and AdamW state.
constexpr char kStoredDtype[] = "F32";
// A rank file's metadata holds "fnv1a64-chunks/<tensor>" -> its chunks' checksums, in hex,
// separated by spaces.
constexpr char kChunkChecksumsPrefix[] = "fnv1a64-chunks/";

// The checksums of `bytes` bytes at `data`, one per chunk of `chunk_bytes`.
std::vector<std::string> ChunkChecksums(const char* data, uint64_t bytes, uint64_t chunk_bytes) {
  std::vector<std::string> checksums;
  for (uint64_t begin = 0; begin < bytes; begin += chunk_bytes) {
    checksums.push_back(Hex64(Fnv1a64(data + begin, std::min(chunk_bytes, bytes - begin))));
  }
  return checksums;
}

// The checksum of the file at `path`, read whole (a tokenizer: megabytes at most).
std::string FileChecksum(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CONVEYOR_CHECK(in.good() || in.eof()) << "cannot read " << path.string();
  return Hex64(Fnv1a64(bytes.data(), bytes.size()));
}

// A rank file's own record of its step and model against the manifest's.
void CheckFileOrigin(const std::map<std::string, std::string>& metadata, const Json& meta,
                     const std::string& where) {
  const int64_t step = meta["step"].get<int64_t>();
  const auto written = metadata.find("step");
  CONVEYOR_CHECK(written != metadata.end() && written->second == std::to_string(step))
      << where << "written at step " << (written == metadata.end() ? "?" : written->second)
      << ", meta.json says step " << step << " (a file from another checkpoint?)";
  const auto model_text = metadata.find("model");
  const Json model = Json::parse(model_text == metadata.end() ? "" : model_text->second, nullptr,
                                 /*allow_exceptions=*/false);
  CONVEYOR_CHECK(model.is_object()) << where << "does not say which model it was written for";
  for (const auto& [key, value] : meta["model"].items()) {
    CONVEYOR_CHECK(model.contains(key) && model[key] == value)
        << where << "written for a model with " << key << " = "
        << (model.contains(key) ? model[key].dump() : "nothing") << ", but meta.json says "
        << value.dump();
  }
  CONVEYOR_CHECK(model == meta["model"]) << where << "written for the model " << model.dump()
                                         << ", but meta.json says " << meta["model"].dump();
}

}  // namespace

std::string CheckpointStepName(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%06lld", static_cast<long long>(step));
  return name;
}

std::string CheckpointRankFile(int rank) { return "rank-" + std::to_string(rank) + ".safetensors"; }

void WriteCheckpointRankFile(const std::string& path,
                             const std::map<std::string, at::Tensor>& tensors,
                             std::map<std::string, std::string> metadata) {
  metadata["chunk_bytes"] = std::to_string(kCheckpointChunkBytes);
  for (const auto& [name, t] : tensors) {
    CONVEYOR_ASSERT(t.scalar_type() == at::kFloat)
        << name << " is " << t.scalar_type() << ", not the fp32 a checkpoint stores";
    // The bytes as safetensors stores them (CPU, row-major).
    const at::Tensor bytes = t.detach().to(at::kCPU).contiguous();
    std::string list;
    for (const std::string& checksum : ChunkChecksums(static_cast<const char*>(bytes.data_ptr()),
                                                      bytes.nbytes(), kCheckpointChunkBytes)) {
      list += (list.empty() ? "" : " ") + checksum;
    }
    metadata[kChunkChecksumsPrefix + name] = list;
  }
  SaveSafetensors(path, tensors, metadata);
}

Json CheckpointManifest(const fs::path& folder, int ranks, Json run) {
  Json files = Json::object();
  for (int r = 0; r < ranks; ++r) {
    const std::string name = CheckpointRankFile(r);
    const SafetensorsHeader header = LoadSafetensorsHeader((folder / name).string());
    const auto chunk_bytes = header.metadata.find("chunk_bytes");
    CONVEYOR_ASSERT(chunk_bytes != header.metadata.end() &&
                    chunk_bytes->second == std::to_string(kCheckpointChunkBytes))
        << name << " was not written by WriteCheckpointRankFile";
    Json tensors = Json::object();
    for (const auto& [tensor, entry] : header.tensors) {
      const auto checksums = header.metadata.find(kChunkChecksumsPrefix + tensor);
      CONVEYOR_ASSERT(checksums != header.metadata.end())
          << name << " lacks the checksums of " << tensor;
      std::istringstream list(checksums->second);
      const std::vector<std::string> chunks{std::istream_iterator<std::string>(list),
                                            std::istream_iterator<std::string>()};
      tensors[tensor] = {
          {"dtype", entry.dtype}, {"shape", entry.shape}, {"fnv1a64_chunks", chunks}};
    }
    files[name] = {{"tensors", tensors}};
  }
  run["format"] = kFormat;
  run["chunk_bytes"] = kCheckpointChunkBytes;
  run["files"] = files;
  if (fs::exists(folder / kTokenizerFile)) {
    run["tokenizer"] = {{"fnv1a64", FileChecksum(folder / kTokenizerFile)}};
  }
  return run;
}

fs::path ResolveCheckpointFolder(const std::string& path) {
  fs::path given(path);
  if (!given.has_filename()) given = given.parent_path();  // "DIR/step-000004/"
  if (fs::exists(given / "meta.json")) return given;
  const fs::path latest = given / "latest";
  CONVEYOR_CHECK(fs::exists(latest))
      << "'" << path << "' is not a checkpoint: it has neither meta.json nor latest";
  std::ifstream in(latest);
  std::string name;
  std::getline(in, name);
  CONVEYOR_CHECK(!name.empty() && fs::exists(given / name / "meta.json"))
      << "'" << latest.string() << "' names '" << name << "', which is not a checkpoint";
  return given / name;
}

Json ReadCheckpointManifest(const fs::path& folder) {
  const std::string where = "checkpoint " + folder.string() + ": ";
  Json meta;
  try {
    std::ifstream in(folder / "meta.json");
    meta = Json::parse(in);
    CONVEYOR_CHECK(meta.is_object()) << where << "meta.json is not a JSON object";
    const std::string format = meta.value("format", "");
    CONVEYOR_CHECK(format != kFormatWithoutChecksums)
        << where << "written by an older conveyor (format " << kFormatWithoutChecksums
        << "), before checkpoints had checksums; it cannot be verified and is refused";
    CONVEYOR_CHECK(format == kFormat || format == kFormatWithWholeChecksums ||
                   format == kFormatWithoutTokenizerChecksum)
        << where << "not a conveyor checkpoint (meta.json has format '" << format << "', expected '"
        << kFormat << "' or the older '" << kFormatWithWholeChecksums << "' or '"
        << kFormatWithoutTokenizerChecksum << "')";
    CONVEYOR_CHECK(meta.contains("step") && meta["step"].is_number_integer() &&
                   meta["step"].get<int64_t>() >= 0)
        << where << "meta.json has no valid step";
    CONVEYOR_CHECK(meta.contains("model") && meta["model"].is_object())
        << where << "meta.json has no model description";
    CONVEYOR_CHECK(meta.contains("files") && meta["files"].is_object() && !meta["files"].empty())
        << where << "meta.json lists no files";
  } catch (const Json::exception& e) {
    CONVEYOR_CHECK(false) << where << "meta.json is corrupt: " << e.what();
  }
  const int64_t step = meta["step"].get<int64_t>();
  const std::string name = folder.filename().string();
  CONVEYOR_CHECK(name.rfind("step-", 0) != 0 || name == CheckpointStepName(step))
      << where << "meta.json says step " << step << ", but the folder is " << name;
  return meta;
}

std::string VerifiedCheckpointTokenizer(const fs::path& folder, const Json& meta) {
  const fs::path path = folder / kTokenizerFile;
  const std::string where = "checkpoint " + folder.string() + ": " + kTokenizerFile + " ";
  const bool present = fs::exists(path);
  if (meta.value("format", "") == kFormatWithoutTokenizerChecksum) {
    return present ? path.string() : "";
  }
  if (!meta.contains("tokenizer")) {
    CONVEYOR_CHECK(!present) << where << "is not listed in meta.json (a file from elsewhere?)";
    return "";
  }
  const Json& listed = meta["tokenizer"];
  CONVEYOR_CHECK(listed.is_object() && listed.contains("fnv1a64") && listed["fnv1a64"].is_string())
      << "checkpoint " << folder.string()
      << ": meta.json's tokenizer is not {fnv1a64}: " << listed.dump();
  CONVEYOR_CHECK(fs::is_regular_file(path)) << where << "is missing (meta.json lists it)";
  const std::string checksum = FileChecksum(path);
  CONVEYOR_CHECK(checksum == listed["fnv1a64"].get<std::string>())
      << where << "fails its checksum (its bytes give " << checksum << ", meta.json says "
      << listed["fnv1a64"].get<std::string>() << "): the file was replaced or is corrupt";
  return path.string();
}

CheckpointFiles::CheckpointFiles(const fs::path& folder, const Json& meta) {
  const std::string where = "checkpoint " + folder.string() + ": ";
  const Json& files = meta["files"];
  for (const auto& entry : fs::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    CONVEYOR_CHECK(entry.path().extension() != ".safetensors" || files.contains(name))
        << where << name << " is not listed in meta.json (a file from another checkpoint?)";
  }
  try {
    // Chunk checksums, or (the older formats) one checksum of each whole tensor.
    const bool chunked = meta.value("format", "") == kFormat;
    const uint64_t chunk_bytes = chunked ? meta.at("chunk_bytes").get<uint64_t>() : 0;
    CONVEYOR_CHECK(!chunked || chunk_bytes > 0)
        << where << "meta.json's chunk_bytes must be positive, got " << chunk_bytes;
    for (const auto& [name, listed] : files.items()) {
      const std::string file = where + name + ": ";
      CONVEYOR_CHECK(fs::path(name).filename() == name &&
                     fs::path(name).extension() == ".safetensors")
          << where << "meta.json lists '" << name << "', which is not a rank file's name";
      const std::string path = (folder / name).string();
      CONVEYOR_CHECK(fs::exists(path)) << file << "missing (meta.json lists it)";
      auto reader = std::make_unique<SafetensorsReader>(path);
      const SafetensorsHeader& header = reader->header();
      CheckFileOrigin(header.metadata, meta, file);
      const Json& tensors = listed.at("tensors");
      for (const auto& [tensor, entry] : header.tensors) {
        CONVEYOR_CHECK(tensors.contains(tensor))
            << file << "tensor '" << tensor << "' is not listed in meta.json";
      }
      for (const auto& [tensor, want] : tensors.items()) {
        const auto found = header.tensors.find(tensor);
        CONVEYOR_CHECK(found != header.tensors.end())
            << file << "lacks tensor '" << tensor << "' (meta.json lists it)";
        const std::string dtype = want.at("dtype");
        CONVEYOR_CHECK(found->second.dtype == dtype)
            << file << "tensor '" << tensor << "' has dtype " << found->second.dtype
            << ", meta.json says " << dtype;
        CONVEYOR_CHECK(Json(found->second.shape) == want.at("shape"))
            << file << "tensor '" << tensor << "' has shape " << Json(found->second.shape).dump()
            << ", meta.json says " << want.at("shape").dump();
        CONVEYOR_CHECK(dtype == kStoredDtype)
            << file << "tensor '" << tensor << "' is stored as " << dtype
            << "; a checkpoint stores every weight and optimizer state as " << kStoredDtype;
        uint64_t bytes = sizeof(float);
        for (int64_t d : found->second.shape) bytes *= static_cast<uint64_t>(d);
        Located located{reader.get(), file, bytes, std::max<uint64_t>(bytes, 1), {}};
        if (chunked) {
          located.chunk_bytes = chunk_bytes;
          located.checksums = want.at("fnv1a64_chunks").get<std::vector<std::string>>();
          const uint64_t chunks = (bytes + chunk_bytes - 1) / chunk_bytes;
          CONVEYOR_CHECK(located.checksums.size() == chunks)
              << file << "tensor '" << tensor << "' has " << located.checksums.size()
              << " chunk checksums in meta.json; its " << bytes << " bytes make " << chunks
              << " chunks of " << chunk_bytes;
        } else {
          located.checksums = {want.at("fnv1a64").get<std::string>()};
        }
        // A tensor in several files (a tied embedding): the first file's copy.
        if (located_.emplace(tensor, std::move(located)).second) {
          stored_.emplace(tensor, StoredTensor{at::kFloat, found->second.shape});
        }
      }
      readers_.push_back(std::move(reader));
    }
  } catch (const Json::exception& e) {
    CONVEYOR_CHECK(false) << where << "meta.json is corrupt: " << e.what();
  }
}

CheckpointFiles::~CheckpointFiles() = default;

std::string CheckpointFiles::Where(const std::string& name) const { return located_.at(name).file; }

void CheckpointFiles::ReadRuns(const std::string& name, const std::vector<ByteRun>& runs,
                               void* out) {
  const Located& tensor = located_.at(name);
  const uint64_t chunk = tensor.chunk_bytes;
  auto* cursor = static_cast<char*>(out);
  std::vector<char> span;  // the chunks covering a group of runs, read once
  for (size_t r = 0; r < runs.size();) {
    // The runs whose chunks touch or follow each other: one span of chunks [first, last].
    const uint64_t first = runs[r].begin / chunk;
    uint64_t last = (runs[r].begin + runs[r].length - 1) / chunk;
    size_t next = r + 1;
    while (next < runs.size() && runs[next].begin / chunk <= last + 1) {
      last = (runs[next].begin + runs[next].length - 1) / chunk;
      ++next;
    }
    const uint64_t begin = first * chunk;
    const uint64_t end = std::min((last + 1) * chunk, tensor.bytes);
    span.resize(end - begin);
    tensor.reader->ReadBytes(name, begin, end - begin, span.data());
    CheckFinite(span.data(), static_cast<int64_t>(span.size() / sizeof(float)), at::kFloat,
                tensor.file, name);
    for (uint64_t c = first; c <= last; ++c) {
      const uint64_t from = c * chunk, to = std::min(from + chunk, tensor.bytes);
      const std::string checksum = Hex64(Fnv1a64(span.data() + (from - begin), to - from));
      CONVEYOR_CHECK(checksum == tensor.checksums[c])
          << tensor.file << "tensor '" << name << "' fails its checksum (its bytes [" << from
          << ", " << to << ") give " << checksum << ", meta.json says " << tensor.checksums[c]
          << "): the file is corrupt";
    }
    for (; r < next; ++r) {
      std::copy_n(span.data() + (runs[r].begin - begin), runs[r].length, cursor);
      cursor += runs[r].length;
    }
  }
}

uint64_t CheckpointFiles::bytes_read() const {
  uint64_t bytes = 0;
  for (const auto& reader : readers_) bytes += reader->bytes_read();
  return bytes;
}

}  // namespace conveyor
