#include "conveyor/common/file_fingerprint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "conveyor/common/scratch_folder_testing.h"

namespace conveyor {
namespace {

TEST(FileFingerprintTest, SameContentsAgreeWhereverTheyLie) {
  ScratchFolder a, b;
  for (const ScratchFolder* f : {&a, &b}) {
    f->Write("model/config.json", "{\"hidden_size\": 64}");
    f->Write("model/weights/model.safetensors", std::string(1000, 'w'));
  }
  const std::string fingerprint = FileFingerprint(a.Path("model"));
  EXPECT_EQ(fingerprint.size(), 16u);
  EXPECT_EQ(FileFingerprint(b.Path("model")), fingerprint);
  EXPECT_EQ(FileFingerprint(a.Path("model/config.json")),
            FileFingerprint(b.Path("model/config.json")));
  EXPECT_NE(FileFingerprint(a.Path("model/config.json")), fingerprint);
}

TEST(FileFingerprintTest, OtherBytesNamesOrSizesDiffer) {
  ScratchFolder a;
  a.Write("m/config.json", "{\"hidden_size\": 64}");
  const std::string before = FileFingerprint(a.Path("m"));
  a.Write("m/config.json", "{\"hidden_size\": 65}");
  EXPECT_NE(FileFingerprint(a.Path("m")), before) << "one byte of a small file";
  const std::string changed = FileFingerprint(a.Path("m"));
  std::filesystem::rename(a.Path("m/config.json"), a.Path("m/config2.json"));
  EXPECT_NE(FileFingerprint(a.Path("m")), changed) << "a file renamed";
  a.Write("m/extra", "");
  EXPECT_NE(FileFingerprint(a.Path("m")), changed) << "a file added";
}

TEST(FileFingerprintTest, ALargeFileIsSampledFromStartToEnd) {
  ScratchFolder a;
  std::string big(16 << 20, 'x');  // 16 MiB: 64 samples of 64 KiB, the last ending at its end
  const std::string path = a.Write("big.bin", big);
  const std::string before = FileFingerprint(path);
  big.back() = 'y';
  a.Write("big.bin", big);
  EXPECT_NE(FileFingerprint(path), before) << "the last byte is sampled";
  big.back() = 'x';
  big.front() = 'y';
  a.Write("big.bin", big);
  EXPECT_NE(FileFingerprint(path), before) << "the first byte is sampled";
  big.front() = 'x';
  big.push_back('x');
  a.Write("big.bin", big);
  EXPECT_NE(FileFingerprint(path), before) << "one byte longer";
}

TEST(FileFingerprintTest, APrefixCoversItsDataSetsFiles) {
  ScratchFolder a;
  a.Write("corpus.bin", "tokens");
  a.Write("corpus.idx", "index");
  a.Write("corpusX.bin", "another data set");
  const std::string before = FileFingerprint(a.Path("corpus"));
  EXPECT_NE(before, "none");
  a.Write("corpusX.bin", "changed, and not part of it");
  EXPECT_EQ(FileFingerprint(a.Path("corpus")), before);
  a.Write("corpus.idx", "index2");
  EXPECT_NE(FileFingerprint(a.Path("corpus")), before);
  EXPECT_EQ(FileFingerprint(a.Path("nothing")), "none");
  EXPECT_EQ(FileFingerprint("/nonexistent/folder/file"), "none");
}

}  // namespace
}  // namespace conveyor
