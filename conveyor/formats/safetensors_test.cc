#include "conveyor/formats/safetensors.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "conveyor/common/error.h"
#include "conveyor/common/file_size_limit_testing.h"
#include "conveyor/common/scratch_folder_testing.h"

namespace conveyor {
namespace {

namespace fs = std::filesystem;

class SafetensorsTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& name) const { return scratch_.Path(name); }

  std::string WriteBytes(const std::string& bytes) const {
    const std::string path = Path("hand.safetensors");
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }

  // Expects LoadSafetensors to refuse `bytes` with a message naming the file and `problem`.
  void ExpectRefused(const std::string& bytes, const std::string& problem) const {
    const std::string path = WriteBytes(bytes);
    try {
      LoadSafetensors(path);
      ADD_FAILURE() << "loaded a file with: " << problem;
    } catch (const UserError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(path), std::string::npos) << what;
      EXPECT_NE(what.find(problem), std::string::npos) << what;
    }
  }

  ScratchFolder scratch_;
};

std::string Le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(v >> (8 * i));
  return s;
}

// A file from its header text and data bytes, by the spec.
std::string Compose(const std::string& header, const std::string& data) {
  return Le64(header.size()) + header + data;
}

std::string Floats(std::initializer_list<float> values) {
  std::string s;
  for (float v : values) s.append(reinterpret_cast<const char*>(&v), 4);
  return s;
}

TEST_F(SafetensorsTest, RoundTripsEveryDtype) {
  at::manual_seed(3);
  std::map<std::string, at::Tensor> tensors = {
      {"f64", at::randn({2, 3}, at::kDouble)},
      {"f32", at::randn({4}, at::kFloat)},
      {"f16", at::randn({3, 1}).to(at::kHalf)},
      {"bf16", at::randn({5}).to(at::kBFloat16)},
      {"i64", at::tensor({int64_t{-1} << 40, int64_t{7}}, at::kLong)},
      {"i32", at::tensor({-3, 2147483647}, at::kInt)},
      {"i16", at::tensor({-300, 5}, at::kShort)},
      {"i8", at::tensor({-128, 127}, at::kChar)},
      {"u8", at::tensor({0, 255}, at::kByte)},
      {"bool", at::tensor({1, 0, 1}, at::kByte).to(at::kBool)},
      {"scalar", at::scalar_tensor(2.5, at::kFloat)},
      {"empty", at::zeros({0, 4}, at::kFloat)},
      {"strided", at::arange(12, at::kFloat).view({3, 4}).t()},
  };
  const std::string path = Path("all.safetensors");
  SaveSafetensors(path, tensors);
  const SafetensorsFile file = LoadSafetensors(path);
  EXPECT_TRUE(file.metadata.empty());
  ASSERT_EQ(file.tensors.size(), tensors.size());
  for (const auto& [name, want] : tensors) {
    const at::Tensor& got = file.tensors.at(name);
    EXPECT_EQ(got.scalar_type(), want.scalar_type()) << name;
    EXPECT_EQ(got.sizes(), want.sizes()) << name;
    EXPECT_TRUE(at::equal(got, want)) << name;
  }
}

TEST_F(SafetensorsTest, MetadataRoundTripsAndDataIsAligned) {
  const std::string path = Path("meta.safetensors");
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"step", "12"}};
  SaveSafetensors(path, {{"w", at::ones({3}, at::kFloat)}}, metadata);
  const SafetensorsFile file = LoadSafetensors(path);
  EXPECT_EQ(file.metadata, metadata);
  std::ifstream in(path, std::ios::binary);
  char length[8];
  in.read(length, 8);
  uint64_t header = 0;
  for (int i = 0; i < 8; ++i) header |= uint64_t{uint8_t(length[i])} << (8 * i);
  EXPECT_EQ((8 + header) % 8, 0u);
  EXPECT_EQ(fs::file_size(path), 8 + header + 12);
}

TEST_F(SafetensorsTest, SaveReplacesAtomicallyAndLeavesNoTemporaryFile) {
  const std::string path = Path("model.safetensors");
  SaveSafetensors(path, {{"a", at::zeros({2}, at::kLong)}});
  SaveSafetensors(path, {{"b", at::ones({3}, at::kDouble)}});
  const SafetensorsFile file = LoadSafetensors(path);
  ASSERT_EQ(file.tensors.size(), 1u);
  EXPECT_TRUE(at::equal(file.tensors.at("b"), at::ones({3}, at::kDouble)));
  EXPECT_EQ(scratch_.Names().size(), 1u);
  // A refused save leaves the old file as it was.
  EXPECT_THROW(SaveSafetensors(path, {{"c", at::ones({2}, at::kComplexFloat)}}), UserError);
  EXPECT_TRUE(LoadSafetensors(path).tensors.count("b"));
  EXPECT_EQ(scratch_.Names().size(), 1u);
}

// A write that fails midway (past RLIMIT_FSIZE, as on a full disk) names the file and
// leaves the old file and no temporary file.
TEST_F(SafetensorsTest, AFailedSaveKeepsTheOldFileAndLeavesNoTemporaryFile) {
  const std::string path = Path("model.safetensors");
  SaveSafetensors(path, {{"a", at::zeros({2}, at::kLong)}});
  std::string error;
  try {
    const FileSizeLimit limit(4096);
    SaveSafetensors(path, {{"big", at::ones({4096}, at::kFloat)}});
  } catch (const UserError& e) {
    error = e.what();
  }
  EXPECT_NE(error.find(path), std::string::npos) << error;
  EXPECT_NE(error.find(std::strerror(EFBIG)), std::string::npos) << error;
  EXPECT_TRUE(LoadSafetensors(path).tensors.count("a"));
  EXPECT_EQ(scratch_.Names().size(), 1u);
}

TEST_F(SafetensorsTest, HeaderAloneGivesDtypesShapesAndMetadata) {
  const std::string path = Path("h.safetensors");
  SaveSafetensors(path, {{"w", at::ones({2, 3}, at::kFloat)}, {"n", at::zeros({4}, at::kLong)}},
                  {{"step", "7"}});
  const SafetensorsHeader header = LoadSafetensorsHeader(path);
  ASSERT_EQ(header.tensors.size(), 2u);
  EXPECT_EQ(header.tensors.at("w").dtype, "F32");
  EXPECT_EQ(header.tensors.at("w").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(header.tensors.at("n").dtype, "I64");
  EXPECT_EQ(header.metadata.at("step"), "7");
  // The layout is checked against the file's size, as a full load does.
  fs::resize_file(path, fs::file_size(path) - 4);
  EXPECT_THROW(LoadSafetensorsHeader(path), UserError);
}

// A reader reads the tensors asked for, in any order, each from its own bytes.
TEST_F(SafetensorsTest, AReaderReadsOneTensorAtATime) {
  const std::string path = Path("r.safetensors");
  const at::Tensor w = at::arange(6, at::kFloat).view({2, 3});
  const at::Tensor n = at::arange(4, at::kLong) * 10;
  SaveSafetensors(path, {{"w", w}, {"n", n}, {"b", at::ones({2}, at::kBool)}});
  SafetensorsReader reader(path);
  EXPECT_EQ(reader.header().tensors.size(), 3u);
  EXPECT_TRUE(at::equal(reader.Read("n"), n));
  EXPECT_TRUE(at::equal(reader.Read("w"), w));
  EXPECT_TRUE(at::equal(reader.Read("n"), n));
  try {
    reader.Read("v");
    ADD_FAILURE() << "read a tensor the file does not have";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("has no tensor 'v'"), std::string::npos) << e.what();
  }
  fs::resize_file(path, fs::file_size(path) - 1);
  EXPECT_THROW(SafetensorsReader{path}, UserError);  // the layout is checked on opening
}

// Any byte range of a tensor is those bytes of the tensor, of every stored dtype, read alone
// (bytes_read counts them); a range outside the tensor, a BOOL tensor or an unknown name is
// refused. (Slices of a tensor: tensor_slice_test.cc.)
TEST_F(SafetensorsTest, AReaderReadsAByteRangeAlone) {
  const std::string path = Path("s.safetensors");
  const at::Tensor w = at::arange(60, at::kFloat).view({3, 4, 5});
  SaveSafetensors(path, {{"w", w}, {"h", w.to(at::kBFloat16)}, {"b", at::ones({2}, at::kBool)}});
  SafetensorsReader reader(path);
  uint64_t read = 0;
  for (const char* name : {"w", "h"}) {
    const at::Tensor whole = reader.Read(name);
    read += whole.nbytes();
    EXPECT_EQ(reader.bytes_read(), read);
    const auto* bytes = static_cast<const char*>(whole.data_ptr());
    const uint64_t size = whole.nbytes();
    for (uint64_t begin = 0; begin <= size; begin += 7) {
      for (uint64_t length = 0; begin + length <= size; length += 5) {
        std::string got(length, '\0');
        reader.ReadBytes(name, begin, length, got.data());
        read += length;
        EXPECT_EQ(got, std::string(bytes + begin, length))
            << name << " [" << begin << ", " << begin + length << ")";
      }
    }
    EXPECT_EQ(reader.bytes_read(), read);
  }
  char out[8];
  EXPECT_THROW(reader.ReadBytes("w", 236, 8, out), UserError);
  EXPECT_THROW(reader.ReadBytes("w", 241, 0, out), UserError);
  EXPECT_THROW(reader.ReadBytes("b", 0, 1, out), UserError);
  EXPECT_THROW(reader.ReadBytes("v", 0, 1, out), UserError);
}

TEST_F(SafetensorsTest, SaveRefusesBadNames) {
  EXPECT_THROW(SaveSafetensors(Path("x"), {{"", at::ones({1})}}), UserError);
  EXPECT_THROW(SaveSafetensors(Path("x"), {{"__metadata__", at::ones({1})}}), UserError);
  EXPECT_THROW(SaveSafetensors(Path("x"), {{"w", at::ones({1})}}, {{"k", "\xff"}}), UserError);
  EXPECT_THROW(SaveSafetensors(Path("no/such/dir/x"), {{"w", at::ones({1})}}), UserError);
}

// Bytes written by hand from the spec: data in another order than the names, an I64 vector,
// metadata, header padded with spaces.
TEST_F(SafetensorsTest, LoadsAHandWrittenFile) {
  const std::string header = R"({"__metadata__":{"format":"pt"},)"
                             R"("b":{"dtype":"I64","shape":[2],"data_offsets":[12,28]},)"
                             R"("a":{"dtype":"F32","shape":[3,1],"data_offsets":[0,12]},)"
                             R"("c":{"dtype":"BOOL","shape":[],"data_offsets":[28,29]}}   )";
  std::string data = Floats({1.5f, -2.f, 0.25f}) + Le64(5) + Le64(uint64_t(-9)) + "\x01";
  const SafetensorsFile file = LoadSafetensors(WriteBytes(Compose(header, data)));
  EXPECT_EQ(file.metadata.at("format"), "pt");
  EXPECT_TRUE(at::equal(file.tensors.at("a"), at::tensor({1.5f, -2.f, 0.25f}).view({3, 1})));
  EXPECT_TRUE(at::equal(file.tensors.at("b"), at::tensor({int64_t{5}, int64_t{-9}})));
  EXPECT_EQ(file.tensors.at("c").dim(), 0);
  EXPECT_TRUE(file.tensors.at("c").item<bool>());
}

TEST_F(SafetensorsTest, RefusesBrokenFraming) {
  ExpectRefused("", "too short");
  ExpectRefused(std::string("\x10\0\0", 3), "too short");
  ExpectRefused(Le64(1000) + "{}", "runs past the end");
  ExpectRefused(Le64(uint64_t(-1)) + "{}", "runs past the end");
  ExpectRefused(Compose("{\"a\":", ""), "not valid JSON");
  ExpectRefused(Compose("", ""), "not valid JSON");
  ExpectRefused(Compose("[1, 2]", ""), "must be a JSON object");
  ExpectRefused(Compose("{} trailing", ""), "not valid JSON");
}

TEST_F(SafetensorsTest, RefusesBadEntries) {
  auto one = [](const std::string& entry) {
    return Compose("{\"w\":" + entry + "}", Floats({1, 2}));
  };
  ExpectRefused(one("3"), "entry must be a JSON object");
  ExpectRefused(one(R"({"shape":[2],"data_offsets":[0,8]})"), "missing \"dtype\"");
  ExpectRefused(one(R"({"dtype":"F32","data_offsets":[0,8]})"), "missing \"shape\"");
  ExpectRefused(one(R"({"dtype":"F32","shape":[2]})"), "missing \"data_offsets\"");
  ExpectRefused(one(R"({"dtype":"Q4","shape":[2],"data_offsets":[0,8]})"),
                "unknown or unsupported dtype \"Q4\"");
  ExpectRefused(one(R"({"dtype":"U32","shape":[2],"data_offsets":[0,8]})"), "unsupported dtype");
  ExpectRefused(one(R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})"),
                "non-negative integers");
  ExpectRefused(one(R"({"dtype":"F32","shape":[2.0],"data_offsets":[0,8]})"),
                "non-negative integers");
  ExpectRefused(one(R"({"dtype":"F32","shape":[2],"data_offsets":[0]})"), "begin <= end");
  ExpectRefused(one(R"({"dtype":"F32","shape":[2],"data_offsets":[8,0]})"), "begin <= end");
  ExpectRefused(one(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})"), "need 12 bytes");
  ExpectRefused(one(R"({"dtype":"F64","shape":[2],"data_offsets":[0,8]})"), "need 16 bytes");
  ExpectRefused(one(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]})"),
                "too large");
  ExpectRefused(Compose(R"({"__metadata__":{"k":1}})", ""), "must map strings to strings");
  ExpectRefused(Compose(R"({"__metadata__":"pt"})", ""), "must map strings to strings");
  ExpectRefused(Compose(R"({"w":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]}})", "\x02"),
                "other than 0 and 1");
}

// Found while writing fuzz/safetensors_fuzzer (which then crashed on it): an empty tensor (a
// zero dimension, so no bytes) whose other dimensions do not fit in int64_t reached at::empty
// as a negative size, or as strides that overflow, and libtorch threw its own error.
TEST_F(SafetensorsTest, RefusesEmptyTensorsWithHugeDimensions) {
  for (const std::string shape :
       {"[0,18446744073709551615]", "[9223372036854775808,0]", "[0,4294967296,4294967296]"}) {
    const std::string header =
        R"({"e":{"dtype":"F32","shape":)" + shape + R"(,"data_offsets":[0,0]}})";
    ExpectRefused(Compose(header, ""), "shape " + shape + " is too large");
  }
  // The largest shape that still fits, empty: accepted.
  const SafetensorsFile file = LoadSafetensors(WriteBytes(Compose(
      R"({"e":{"dtype":"F32","shape":[0,9223372036854775807],"data_offsets":[0,0]}})", "")));
  EXPECT_EQ(file.tensors.at("e").numel(), 0);
}

TEST_F(SafetensorsTest, RefusesBadLayouts) {
  const std::string a = R"("a":{"dtype":"F32","shape":[1],"data_offsets":)";
  const std::string b = R"("b":{"dtype":"F32","shape":[1],"data_offsets":)";
  const std::string eight = Floats({1, 2});
  ExpectRefused(Compose("{" + a + "[0,4]}," + b + "[4,8]}," + a + "[4,8]}}", eight),
                "names \"a\" twice");
  ExpectRefused(Compose("{" + a + "[0,4]}," + b + "[2,6]}}", eight), "overlapping");
  ExpectRefused(Compose("{" + a + "[0,4]}," + b + "[0,4]}}", eight), "overlapping");
  ExpectRefused(Compose("{" + a + "[0,4]}," + b + "[8,12]}}", eight + eight),
                "[4, 8) belong to no tensor");
  ExpectRefused(Compose("{" + a + "[4,8]}}", eight), "[0, 4) belong to no tensor");
  ExpectRefused(Compose("{" + a + "[0,4]}," + b + "[8,12]}}", eight), "past the end of the data");
  ExpectRefused(Compose("{" + a + "[0,4]}}", eight), "4 trailing bytes");
}

TEST_F(SafetensorsTest, RefusesATruncatedFile) {
  const std::string path = Path("cut.safetensors");
  SaveSafetensors(path, {{"a", at::ones({4})}, {"b", at::ones({4})}});
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ExpectRefused(bytes.substr(0, bytes.size() - 3),
                "tensor 'b' has data_offsets [16, 32] past the end");
  ExpectRefused(bytes.substr(0, 20), "runs past the end of the file");
}

TEST_F(SafetensorsTest, RefusesAMissingFile) {
  try {
    LoadSafetensors(Path("absent.safetensors"));
    ADD_FAILURE();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("absent.safetensors"), std::string::npos);
  }
}

}  // namespace
}  // namespace conveyor
