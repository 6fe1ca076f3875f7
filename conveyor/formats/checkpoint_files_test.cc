#include "conveyor/formats/checkpoint_files.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "conveyor/common/checksum.h"
#include "conveyor/common/error.h"
#include "conveyor/common/scratch_folder_testing.h"
#include "conveyor/formats/tensor_slice.h"
#include "conveyor/nn/tensor_parallel.h"

namespace conveyor {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// A step folder of one rank file holding "param/w", (800, 1024) F32: 3,276,800 bytes, four
// chunks (three of 1 MiB and one of 131,072 bytes). Split along dim 0 over 4 ranks, rank r
// reads bytes [819,200 r, 819,200 (r + 1)): rank 0 chunk 0, rank 1 chunks 0 and 1, rank 2
// chunks 1 and 2, rank 3 chunks 2 and 3.
class CheckpointFilesTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kBytes = 800 * 1024 * 4;

  void SetUp() override {
    fs::create_directories(folder_);
    whole_ = at::arange(800 * 1024, at::kFloat).view({800, 1024}) / 1024;
    WriteCheckpointRankFile(RankFile().string(), {{"param/w", whole_}, {"param/b", whole_[0]}},
                            {{"step", "3"}, {"rank", "0"}, {"model", R"({"model":"gpt"})"}});
    const Json run = {{"step", 3}, {"model", {{"model", "gpt"}}}};
    WriteMeta(CheckpointManifest(folder_, 1, run));
  }

  fs::path RankFile() const { return folder_ / CheckpointRankFile(0); }
  void WriteMeta(const Json& meta) const { std::ofstream(folder_ / "meta.json") << meta.dump(2); }
  Json ReadMeta() const { return ReadCheckpointManifest(folder_); }

  // Changes the byte `offset` of param/w's data in the rank file to `bytes`.
  void Overwrite(uint64_t offset, const void* bytes, size_t size) const {
    std::fstream file(RankFile(), std::ios::in | std::ios::out | std::ios::binary);
    char length[8];
    file.read(length, 8);
    uint64_t header = 0;
    for (int i = 0; i < 8; ++i) header |= uint64_t{static_cast<uint8_t>(length[i])} << (8 * i);
    std::string text(header, '\0');
    file.read(text.data(), static_cast<std::streamsize>(header));
    const uint64_t begin = Json::parse(text).at("param/w").at("data_offsets").at(0);
    file.seekp(static_cast<std::streamoff>(8 + header + begin + offset));
    file.write(static_cast<const char*>(bytes), static_cast<std::streamsize>(size));
  }

  // The manifest as "conveyor-checkpoint-3" wrote it: one checksum of each whole tensor.
  void DowngradeToWholeChecksums() const {
    Json meta = ReadMeta();
    meta["format"] = "conveyor-checkpoint-3";
    meta.erase("chunk_bytes");
    const SafetensorsFile file = LoadSafetensors(RankFile().string());
    for (auto& [name, tensor] : meta["files"][CheckpointRankFile(0)]["tensors"].items()) {
      const at::Tensor& t = file.tensors.at(name);
      tensor.erase("fnv1a64_chunks");
      tensor["fnv1a64"] = Hex64(Fnv1a64(t.data_ptr(), t.nbytes()));
    }
    WriteMeta(meta);
  }

  // Expects rank `rank` of 4 reading its dim-0 slice of param/w to be refused naming `part`.
  void ExpectRankRefused(int rank, const std::string& part) const {
    CheckpointFiles files(folder_, ReadMeta());
    try {
      ReadTensorSlice(files, "param/w", ColumnParallel(), 4, rank);
      ADD_FAILURE() << "rank " << rank << " read; expected a refusal naming " << part;
    } catch (const UserError& e) {
      for (const std::string& want : {part, std::string("rank-0.safetensors: tensor 'param/w'")}) {
        EXPECT_NE(std::string(e.what()).find(want), std::string::npos)
            << "rank " << rank << ": " << e.what();
      }
    }
  }

  // Rank `rank` of 4 reads its slice, which is TakeShard's; returns the bytes it read.
  uint64_t ExpectRankReads(int rank) const {
    CheckpointFiles files(folder_, ReadMeta());
    const at::Tensor got = ReadTensorSlice(files, "param/w", ColumnParallel(), 4, rank);
    EXPECT_TRUE(at::equal(got, TakeShard(whole_, ColumnParallel().tp, 4, rank))) << rank;
    return files.bytes_read();
  }

  ScratchFolder scratch_;
  const fs::path folder_ = fs::path(scratch_.path()) / CheckpointStepName(3);
  at::Tensor whole_;
};

// The manifest records the chunk size and each tensor's chunk checksums; the rank files and
// the manifest are opened and listed without reading data.
TEST_F(CheckpointFilesTest, TheManifestRecordsChunkChecksums) {
  const Json meta = ReadMeta();
  EXPECT_EQ(meta["format"], "conveyor-checkpoint-4");
  EXPECT_EQ(meta["chunk_bytes"], kCheckpointChunkBytes);
  const Json& w = meta["files"]["rank-0.safetensors"]["tensors"]["param/w"];
  EXPECT_EQ(w["dtype"], "F32");
  EXPECT_EQ(w["shape"], Json({800, 1024}));
  ASSERT_EQ(w["fnv1a64_chunks"].size(), 4u);
  EXPECT_EQ(w["fnv1a64_chunks"][3],
            Hex64(Fnv1a64(static_cast<const char*>(whole_.data_ptr()) + 3 * (1 << 20),
                          kBytes - 3 * (1 << 20))));
  CheckpointFiles files(folder_, meta);
  EXPECT_EQ(files.tensors().at("param/w").shape, std::vector<int64_t>({800, 1024}));
  EXPECT_EQ(files.tensors().at("param/b").dtype, at::kFloat);
  EXPECT_EQ(files.bytes_read(), 0u);
}

// A rank reads the chunks covering its slice and no others: fewer bytes than the file holds.
TEST_F(CheckpointFilesTest, ARankReadsTheChunksCoveringItsSliceAlone) {
  const uint64_t chunk = kCheckpointChunkBytes;
  EXPECT_EQ(ExpectRankReads(0), chunk);
  EXPECT_EQ(ExpectRankReads(1), 2 * chunk);
  EXPECT_EQ(ExpectRankReads(3), kBytes - 2 * chunk);
  EXPECT_LT(ExpectRankReads(2), fs::file_size(RankFile()));
  // A split along dim 1 is strided: its runs cover every chunk, read once each.
  CheckpointFiles files(folder_, ReadMeta());
  EXPECT_TRUE(at::equal(ReadTensorSlice(files, "param/w", RowParallel(), 4, 1),
                        TakeShard(whole_, RowParallel().tp, 4, 1)));
  EXPECT_EQ(files.bytes_read(), kBytes);
}

// A changed byte in a chunk a slice covers is refused; a rank whose slice is outside that
// chunk does not read it and loads.
TEST_F(CheckpointFilesTest, AChunkFailingItsChecksumIsRefusedWhereItIsRead) {
  const float changed = 12345.0f;                  // finite: the checksum alone catches it
  Overwrite(3'000'000, &changed, sizeof changed);  // chunk 2: ranks 2 and 3 read it
  ExpectRankReads(0);
  ExpectRankReads(1);
  ExpectRankRefused(2, "fails its checksum (its bytes [2097152, 3145728) give");
  ExpectRankRefused(3, "fails its checksum");
  // NaN is named before the checksum it also breaks.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Overwrite(0, &nan, sizeof nan);
  ExpectRankRefused(0, "holds NaN or infinite values (1 of the 262144 read)");
}

// A checkpoint of the format with one checksum per whole tensor loads as it always did:
// every rank reads the whole tensor and checks it whole.
TEST_F(CheckpointFilesTest, AnOlderFormatCheckpointReadsWholeTensors) {
  DowngradeToWholeChecksums();
  for (int rank = 0; rank < 4; ++rank) EXPECT_EQ(ExpectRankReads(rank), kBytes);
  const float changed = 12345.0f;
  Overwrite(3'000'000, &changed, sizeof changed);
  ExpectRankRefused(0, "fails its checksum (its bytes [0, 3276800) give");
  Json meta = ReadMeta();
  meta["format"] = "conveyor-checkpoint-1";
  WriteMeta(meta);
  EXPECT_THROW(ReadMeta(), UserError);
}

// A manifest whose chunk checksums do not match the tensor's size, or whose chunk size is
// not positive, is refused before anything is read.
TEST_F(CheckpointFilesTest, RefusesAManifestWithTheWrongChunks) {
  const Json clean = ReadMeta();
  Json meta = clean;
  meta["files"]["rank-0.safetensors"]["tensors"]["param/w"]["fnv1a64_chunks"].erase(3);
  try {
    CheckpointFiles files(folder_, meta);
    ADD_FAILURE() << "opened";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'param/w' has 3 chunk checksums in meta.json; "
                                         "its 3276800 bytes make 4 chunks of 1048576"),
              std::string::npos)
        << e.what();
  }
  meta = clean;
  meta["chunk_bytes"] = 0;
  EXPECT_THROW((CheckpointFiles{folder_, meta}), UserError);
  meta.erase("chunk_bytes");
  EXPECT_THROW((CheckpointFiles{folder_, meta}), UserError);  // "meta.json is corrupt"
}

}  // namespace
}  // namespace conveyor
