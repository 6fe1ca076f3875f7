// IndexedDataset and IndexedDatasetWriter: the bytes of the format, refusals of broken files,
// and agreement with Megatron-Core's own reader and builder (the reference environment).
#include "conveyor/data/indexed_dataset.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/common/reference_env_testing.h"
#include "conveyor/common/scratch_folder_testing.h"
#include "conveyor/data/open_token_source.h"

namespace conveyor {
namespace {

namespace fs = std::filesystem;
using Documents = std::vector<std::vector<int64_t>>;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

void Write(const std::string& prefix, int64_t vocab, const Documents& documents) {
  IndexedDatasetWriter writer(prefix, vocab);
  for (const auto& d : documents) writer.AddDocument(d);
  writer.Finish();
}

Documents ReadAll(const IndexedDataset& data) {
  Documents documents;
  for (int64_t j = 0; j < data.num_documents(); ++j) {
    EXPECT_EQ(data.document_end(j), data.document_first(j) + 1);
    documents.push_back(data.Read(data.document_first(j)));
  }
  return documents;
}

// Opening `prefix` throws UserError holding every one of `needles`.
void ExpectRefused(const std::string& prefix, const std::vector<std::string>& needles) {
  try {
    IndexedDataset data(prefix);
    ADD_FAILURE() << "opened";
  } catch (const UserError& e) {
    for (const std::string& needle : needles) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
          << "'" << needle << "' not in: " << e.what();
    }
  }
}

class IndexedDatasetTest : public ::testing::Test {
 protected:
  void SetUp() override { prefix_ = scratch_.path() + "/data"; }
  ScratchFolder scratch_;
  std::string prefix_;
};

// uint16 below 65500 tokens, int32 above; the files hold exactly what the format says.
TEST_F(IndexedDatasetTest, WhatIsWrittenIsReadBackInTheDtypeOfItsVocabulary) {
  const Documents documents = {{1, 2, 3}, {}, {299, 0}, {7}};
  for (const int64_t vocab : {300, 70000}) {
    SCOPED_TRACE("vocab " + std::to_string(vocab));
    Documents written = documents;
    if (vocab > 65535) written[3] = {69999};
    Write(prefix_, vocab, written);
    const IndexedDataset data(prefix_);
    const int bytes = vocab == 300 ? 2 : 4;
    EXPECT_EQ(data.dtype().bytes, bytes);
    EXPECT_STREQ(data.dtype().name, vocab == 300 ? "uint16" : "int32");
    EXPECT_EQ(data.num_documents(), 4);
    EXPECT_EQ(data.num_sequences(), 4);
    EXPECT_EQ(data.num_tokens(), 6);
    EXPECT_EQ(ReadAll(data), written);
    EXPECT_EQ(fs::file_size(prefix_ + ".bin"), 6u * bytes);
    EXPECT_EQ(fs::file_size(prefix_ + ".idx"), 34u + 4 * 12 + 5 * 8);
    int64_t middle[1];
    data.Read(2, 1, 1, middle);
    EXPECT_EQ(middle[0], 0);
    EXPECT_THROW(data.Read(2, 1, 2, middle), UserError);
  }
}

TEST_F(IndexedDatasetTest, AWriterThatDoesNotFinishLeavesNothing) {
  Write(prefix_, 300, {{5, 6}});
  const std::string bin = ReadFile(prefix_ + ".bin"), idx = ReadFile(prefix_ + ".idx");
  {
    IndexedDatasetWriter writer(prefix_, 300);
    writer.AddDocument(std::vector<int64_t>{1, 2, 3});
    EXPECT_THROW(writer.AddDocument(std::vector<int64_t>{4, 300}), UserError);
  }
  EXPECT_EQ(ReadFile(prefix_ + ".bin"), bin);
  EXPECT_EQ(ReadFile(prefix_ + ".idx"), idx);
  EXPECT_EQ(scratch_.Names(), (std::set<std::string>{"data.bin", "data.idx"}));
}

TEST_F(IndexedDatasetTest, ATokenOutsideTheVocabularyIsNamed) {
  try {
    IndexedDatasetWriter writer(prefix_, 300);
    writer.AddDocument(std::vector<int64_t>{1});
    writer.AddDocument(std::vector<int64_t>{1, 2, -4});
    ADD_FAILURE() << "accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("document 1, token 2 is -4, outside the vocabulary"),
              std::string::npos)
        << e.what();
  }
  Write(prefix_, 300, {{1, 2}, {3, 250, 4}});
  const IndexedDataset data(prefix_);
  const std::vector<int64_t> second = data.Read(1);
  EXPECT_NO_THROW(data.CheckTokens(2, second, 300));
  try {
    data.CheckTokens(2, second, 200);
    ADD_FAILURE() << "250 passed a vocabulary of 200";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()),
              prefix_ + ": document 1, token 1 is 250, outside the model's vocabulary [0, 200)");
  }
}

// Every way the pair of files can disagree is refused, naming the file and the place.
TEST_F(IndexedDatasetTest, BrokenFilesAreRefusedNamingFileAndPlace) {
  Write(prefix_, 300, {{1, 2, 3}, {4, 5}});
  const std::string idx = ReadFile(prefix_ + ".idx"), bin = ReadFile(prefix_ + ".bin");
  auto with_idx = [&](const std::string& bytes, const std::vector<std::string>& needles) {
    WriteFile(prefix_ + ".idx", bytes);
    ExpectRefused(prefix_, needles);
    WriteFile(prefix_ + ".idx", idx);
  };
  auto patched = [&](size_t at, const void* value, size_t size) {
    std::string bytes = idx;
    std::memcpy(bytes.data() + at, value, size);
    return bytes;
  };
  with_idx(idx.substr(0, 20), {"data.idx is truncated: 20 bytes", "header alone takes 34"});
  with_idx(idx.substr(0, idx.size() - 8), {"data.idx holds", "(truncated)"});
  with_idx(idx + "x", {"needs " + std::to_string(idx.size())});
  with_idx("NOTMMIDIDX" + idx.substr(10), {"not a Megatron indexed data set"});
  const uint64_t two = 2;
  with_idx(patched(9, &two, 8), {"version 2 at byte 9"});
  const uint8_t nine = 9, seven = 7;
  with_idx(patched(17, &nine, 1), {"unknown dtype code 9 at byte 17"});
  with_idx(patched(17, &seven, 1), {"dtype code 7 (float32)", "no token ids"});
  const uint64_t huge = uint64_t{1} << 62;
  with_idx(patched(18, &huge, 8), {"needs more than 2^63"});
  const int32_t negative = -1;
  with_idx(patched(34, &negative, 4), {"sequence 0 has length -1"});
  const int64_t far = 1000;
  with_idx(patched(34 + 8 + 8, &far, 8), {"sequence 1 takes 4 bytes from byte 1000", "has 10"});
  // Found by the fuzzer: an offset near 2^63 must not overflow the bound's sum.
  const int64_t huge_offset = std::numeric_limits<int64_t>::max() - 1;
  with_idx(patched(34 + 8 + 8, &huge_offset, 8),
           {"sequence 1 takes 4 bytes from byte 9223372036854775806"});
  const int64_t last = 1;
  with_idx(patched(34 + 24 + 16, &last, 8), {"last document index is 1, not the 2 sequences"});
  const int64_t back = 3;
  with_idx(patched(34 + 24 + 8, &back, 8), {"document index 1 is 3"});
  WriteFile(prefix_ + ".bin", bin.substr(0, 7));
  ExpectRefused(prefix_, {"sequence 1 takes 4 bytes from byte 6 of", "data.bin, which has 7"});
  fs::remove(prefix_ + ".bin");
  ExpectRefused(prefix_, {"cannot open", "data.bin"});
}

// Runs testdata/reference/megatron_core_indexed.py (Megatron-Core's IndexedDataset and
// IndexedDatasetBuilder) on the steps of `job` in `dir`; its results, one a step.
nlohmann::json RunMegatronCore(const std::string& dir, const nlohmann::json& job) {
  WriteFile(dir + "/job.json", job.dump());
  const ReferenceRun run =
      RunReferenceScript("megatron_core_indexed.py", dir + "/job.json " + dir + "/out.json");
  EXPECT_TRUE(run.ok()) << run.output;
  if (!run.ok()) return nlohmann::json::array();
  return nlohmann::json::parse(std::ifstream(dir + "/out.json"));
}

// Documents of one sequence each, as the script's JSON has them.
nlohmann::json OneSequenceEach(const Documents& documents) {
  nlohmann::json json = nlohmann::json::array();
  for (const auto& d : documents) json.push_back(nlohmann::json::array({d}));
  return json;
}

// Megatron-Core reads conveyor's files in both dtypes, empty documents included, document for
// document and as one stream; its builder writes the same documents to the same bytes; and
// two of conveyor's data sets merged by the builder (tools/merge_datasets.py) read back in
// conveyor as both in turn.
TEST_F(IndexedDatasetTest, MegatronCoreReadsWhatConveyorWritesByteForByte) {
  CONVEYOR_SKIP_WITHOUT_REFERENCE_ENV();
  const std::string dir = scratch_.path();
  Documents small = {{1, 2, 3}, {}, {299, 0}, {7}};
  for (int64_t j = 0; j < 3; ++j) {
    small.emplace_back();
    for (int64_t k = 0; k < 100 + 37 * j; ++k) small.back().push_back((j * 101 + k * 7) % 300);
  }
  const Documents large = {{69999, 65535, 65536, 0}, {}, {12345}, {65499, 65500, 1}};
  const Documents other = {{5}, {6, 7}, {}};
  Write(dir + "/small", 300, small);
  Write(dir + "/large", 70000, large);
  Write(dir + "/other", 300, other);
  const nlohmann::json results = RunMegatronCore(
      dir,
      {{{"read", dir + "/small"}},
       {{"read", dir + "/large"}},
       {{"write", dir + "/their_small"}, {"vocab", 300}, {"documents", OneSequenceEach(small)}},
       {{"write", dir + "/their_large"}, {"vocab", 70000}, {"documents", OneSequenceEach(large)}},
       {{"merge", dir + "/merged"}, {"inputs", {dir + "/small", dir + "/other"}}, {"vocab", 300}}});
  ASSERT_EQ(results.size(), 5u);
  for (const auto& [result, documents, dtype] :
       {std::tuple{results[0], small, "uint16"}, std::tuple{results[1], large, "int32"}}) {
    SCOPED_TRACE(dtype);
    EXPECT_EQ(result["dtype"], dtype);
    std::vector<int64_t> lengths, indices = {0}, stream;
    for (const auto& d : documents) {
      lengths.push_back(static_cast<int64_t>(d.size()));
      indices.push_back(static_cast<int64_t>(lengths.size()));
      stream.insert(stream.end(), d.begin(), d.end());
    }
    EXPECT_EQ(result["sequence_lengths"], nlohmann::json(lengths));
    EXPECT_EQ(result["document_indices"], nlohmann::json(indices));
    EXPECT_EQ(result["documents"], OneSequenceEach(documents));
    EXPECT_EQ(result["stream"], nlohmann::json(stream));
  }
  for (const std::string name : {"small", "large"}) {
    for (const std::string ext : {".bin", ".idx"}) {
      EXPECT_EQ(ReadFile(dir + "/their_" + name + ext), ReadFile(dir + "/" + name + ext))
          << name << ext << ": Megatron-Core's builder wrote other bytes";
    }
  }
  // A loss mask (uint8, open_token_source.h) is an indexed data set Megatron-Core reads too,
  // its documents those of its data set.
  Documents mask;
  for (const auto& d : small) {
    mask.emplace_back();
    for (size_t k = 0; k < d.size(); ++k) mask.back().push_back(k % 3 == 0 ? 0 : 1);
  }
  IndexedDatasetWriter mask_writer(LossMaskPrefix(dir + "/small"), 2, ByteDtype());
  for (const auto& d : mask) mask_writer.AddDocument(d);
  mask_writer.Finish();
  const nlohmann::json mask_read =
      RunMegatronCore(dir, {{{"read", LossMaskPrefix(dir + "/small")}}})[0];
  EXPECT_EQ(mask_read["dtype"], "uint8");
  EXPECT_EQ(mask_read["documents"], OneSequenceEach(mask));
  EXPECT_EQ(mask_read["document_indices"], results[0]["document_indices"]);
  const IndexedDataset merged(dir + "/merged");
  Documents both = small;
  both.insert(both.end(), other.begin(), other.end());
  EXPECT_STREQ(merged.dtype().name, "uint16");
  EXPECT_TRUE(merged.contiguous());
  EXPECT_EQ(ReadAll(merged), both);
}

// conveyor reads what Megatron-Core's builder writes, in uint16 and in int32: documents of
// several sequences (preprocess_data.py --split-sentences), empty sequences and documents;
// every sequence's tokens, the document boundaries, and the stream train reads.
TEST_F(IndexedDatasetTest, ConveyorReadsWhatMegatronCoreWrites) {
  CONVEYOR_SKIP_WITHOUT_REFERENCE_ENV();
  const std::string dir = scratch_.path();
  const nlohmann::json small = nlohmann::json::parse(
      R"([[[5, 6], [7]], [[255]], [[], [8, 9, 10]], [[]], [[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]]])");
  const nlohmann::json large =
      nlohmann::json::parse(R"([[[100000, 0], [65535]], [[]], [[131071], [], [65536, 2]], [[1]]])");
  const nlohmann::json results =
      RunMegatronCore(dir, {{{"write", dir + "/small"}, {"vocab", 256}, {"documents", small}},
                            {{"write", dir + "/large"}, {"vocab", 131072}, {"documents", large}}});
  ASSERT_EQ(results.size(), 2u);
  for (const auto& [name, documents, dtype] :
       {std::tuple{"small", small, "uint16"}, std::tuple{"large", large, "int32"}}) {
    SCOPED_TRACE(name);
    const IndexedDataset data(dir + "/" + name);
    EXPECT_STREQ(data.dtype().name, dtype);
    ASSERT_EQ(data.num_documents(), static_cast<int64_t>(documents.size()));
    ASSERT_TRUE(data.contiguous());
    std::vector<int64_t> stream;
    int64_t sequences = 0;
    for (int64_t j = 0; j < data.num_documents(); ++j) {
      const nlohmann::json& document = documents[j];
      EXPECT_EQ(data.document_first(j), sequences) << "document " << j;
      EXPECT_EQ(data.DocumentOffset(j), static_cast<int64_t>(stream.size())) << "document " << j;
      ASSERT_EQ(data.document_end(j) - data.document_first(j),
                static_cast<int64_t>(document.size()));
      for (size_t k = 0; k < document.size(); ++k, ++sequences) {
        EXPECT_EQ(data.sequence_length(sequences), static_cast<int64_t>(document[k].size()));
        EXPECT_EQ(nlohmann::json(data.Read(sequences)), document[k])
            << "document " << j << ", sequence " << k;
        for (const int64_t token : document[k]) stream.push_back(token);
      }
    }
    EXPECT_EQ(data.num_sequences(), sequences);
    ASSERT_EQ(data.num_tokens(), static_cast<int64_t>(stream.size()));
    std::vector<int64_t> read(stream.size());
    data.ReadStream(0, data.num_tokens(), read.data());
    EXPECT_EQ(read, stream);
  }
}

}  // namespace
}  // namespace conveyor
