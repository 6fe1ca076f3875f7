#include "conveyor/common/event_file_writer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "conveyor/common/checksum.h"
#include "conveyor/common/error.h"
#include "conveyor/common/scratch_folder_testing.h"

namespace conveyor {
namespace {

std::string Hex(std::string_view bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : bytes) {
    hex.push_back(kDigits[c >> 4]);
    hex.push_back(kDigits[c & 15]);
  }
  return hex;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

uint64_t LittleEndian(std::string_view bytes) {
  uint64_t value = 0;
  for (size_t i = bytes.size(); i-- > 0;) value = value << 8 | static_cast<unsigned char>(bytes[i]);
  return value;
}

// The records of a TFRecord file, each checked: its length's and its data's masked CRCs.
std::vector<std::string> Records(std::string_view file) {
  std::vector<std::string> records;
  while (!file.empty()) {
    EXPECT_GE(file.size(), 12u);
    if (file.size() < 12) break;
    const uint64_t length = LittleEndian(file.substr(0, 8));
    EXPECT_EQ(LittleEndian(file.substr(8, 4)), MaskedCrc32c(file.data(), 8));
    EXPECT_GE(file.size(), 16 + length);
    if (file.size() < 16 + length) break;
    const std::string_view data = file.substr(12, length);
    EXPECT_EQ(LittleEndian(file.substr(12 + length, 4)), MaskedCrc32c(data.data(), data.size()));
    records.emplace_back(data);
    file.remove_prefix(16 + length);
  }
  return records;
}

// The records below are what TensorBoard's own writer (tensorboard.compat.proto.event_pb2's
// Event serialized, framed by tensorboard.summary.writer.record_writer.RecordWriter) makes of
// the same events: the bytes must be equal, CRCs included.
TEST(EventFileWriterTest, FileVersionRecordIsTensorBoardsBytes) {
  EXPECT_EQ(Hex(FrameRecord(FileVersionEvent(1.5))),
            "1800000000000000"                // length 24
            "a37f4b22"                        // its masked CRC-32C
            "09000000000000f83f"              // wall_time (field 1, fixed64) 1.5
            "1a0d627261696e2e4576656e743a32"  // file_version (field 3) "brain.Event:2"
            "2a28646c");                      // the data's masked CRC-32C
}

TEST(EventFileWriterTest, ScalarsRecordIsTensorBoardsBytes) {
  const std::string event = ScalarsEvent(1.5, 300, {{"train/loss", 2.25}, {"train/lr", 0.001}});
  EXPECT_EQ(Hex(event),
            "09000000000000f83f"                      // wall_time 1.5
            "10ac02"                                  // step (field 2, varint) 300
            "2a24"                                    // summary (field 5), 36 bytes
            "0a110a0a747261696e2f6c6f73731500001040"  // value{tag "train/loss", simple_value 2.25}
            "0a0f0a08747261696e2f6c72156f12833a");    // value{tag "train/lr", simple_value 0.001f}
  EXPECT_EQ(Hex(FrameRecord(event)), "3200000000000000241956ec" + Hex(event) + "41fb0799");
}

TEST(EventFileWriterTest, MaskedCrcRotatesAndOffsetsTheCrc) {
  const uint32_t crc = Crc32c("123456789", 9);  // 0xe3069283
  EXPECT_EQ(MaskedCrc32c("123456789", 9), ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
  EXPECT_EQ(MaskedCrc32c("123456789", 9), 0xc78ab0e5u);  // TensorBoard's masked_crc32c
}

TEST(EventFileWriterTest, WritesTheVersionThenOneRecordPerWriteFlushedAtOnce) {
  const ScratchFolder scratch;
  const std::string dir = scratch.Path("a/b");  // parents made too
  EventFileWriter writer(dir);
  const std::string name = std::filesystem::path(writer.path()).filename().string();
  EXPECT_EQ(std::filesystem::path(writer.path()).parent_path(), std::filesystem::path(dir));
  EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
  writer.Write(1, {{"train/loss", 4.5}});
  writer.Write(2, {});  // nothing
  writer.Write(2, {{"train/loss", 4.0}, {"eval/loss", 4.25}});
  // Read while the writer is open: every record is already in the file.
  const std::vector<std::string> records = Records(ReadAll(writer.path()));
  ASSERT_EQ(records.size(), 3u);
  EXPECT_NE(records[0].find("brain.Event:2"), std::string::npos);
  // The step of each event: field 2 after the 9 bytes of wall_time.
  EXPECT_EQ(Hex(records[1].substr(9, 2)), "1001");
  EXPECT_EQ(Hex(records[2].substr(9, 2)), "1002");
  EXPECT_NE(records[2].find("eval/loss"), std::string::npos);
  // The wall time is now (seconds since the epoch), not 0.
  double wall_time;
  std::memcpy(&wall_time, records[1].data() + 1, 8);
  EXPECT_GT(wall_time, 1.6e9);
}

TEST(EventFileWriterTest, TwoWritersInOneFolderMakeTwoFiles) {
  const ScratchFolder scratch;
  const std::string dir = scratch.path();
  EventFileWriter first(dir), second(dir);
  EXPECT_NE(first.path(), second.path());
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_NE(entry.path().filename().string().find("tfevents"), std::string::npos);
    ++files;
  }
  EXPECT_EQ(files, 2);
}

TEST(EventFileWriterTest, AFolderThatCannotBeMadeIsNamed) {
  const ScratchFolder scratch;
  const std::string dir = scratch.path();
  scratch.Write("file", "x");
  try {
    EventFileWriter writer(dir + "/file/sub");
    FAIL() << "made a folder under a file";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/file/sub"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace conveyor
