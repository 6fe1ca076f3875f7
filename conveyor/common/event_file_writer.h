// EventFileWriter: scalars in TensorBoard's event-file format, written so that a run killed at
// any moment leaves a file TensorBoard reads up to the last record written.
//
// The file is a sequence of TFRecord records, each
//   uint64 length (little-endian), uint32 MaskedCrc32c(length's 8 bytes),
//   `length` bytes of data, uint32 MaskedCrc32c(data),
// whose data is one serialized tensorflow.Event protocol buffer. The first event carries
// file_version "brain.Event:2"; every later one carries wall_time (seconds since the Unix
// epoch), step and a Summary of values, each a tag and a simple_value (a 32-bit float).
//
// Crash safety: each event is framed in memory and handed to the operating system with one
// write(2) as it is produced (no user-space buffer), so a SIGKILL leaves every event written
// before it whole. Not fsynced: a power loss may lose the last ones.
//
// Thread-safety: one EventFileWriter is used by one thread. Writers in one folder (several
// runs, or one resumed) each create a file of their own.
#ifndef CONVEYOR_COMMON_EVENT_FILE_WRITER_H_
#define CONVEYOR_COMMON_EVENT_FILE_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace conveyor {

// One value of a Summary: a tag ("train/loss") and its value (stored as a 32-bit float).
using TaggedScalar = std::pair<std::string, double>;

class EventFileWriter {
 public:
  // Creates `dir` (and its missing parents) and in it a new file named
  // events.out.tfevents.<seconds since the epoch>.<host name> (".<n>" appended when another
  // file has that name), then writes the file-version event. UserError naming `dir` or the
  // file and the system's reason when either cannot be made.
  explicit EventFileWriter(const std::string& dir);
  EventFileWriter(const EventFileWriter&) = delete;
  EventFileWriter& operator=(const EventFileWriter&) = delete;
  ~EventFileWriter();  // closes the file

  // Appends one event at `step` holding `scalars` (in order; none: nothing is written), its
  // wall time now. UserError naming the file when the write fails (a full disk).
  void Write(int64_t step, const std::vector<TaggedScalar>& scalars);

  // The file written.
  const std::string& path() const { return path_; }

 private:
  void Append(const std::string& record);

  std::string path_;
  int fd_ = -1;
};

// The pieces of the format, for tests and for other writers. All pure.

// TFRecord's masked checksum: Crc32c rotated right by 15 bits, plus 0xa282ead8.
uint32_t MaskedCrc32c(const void* data, size_t bytes);

// `data` framed as one TFRecord record (above).
std::string FrameRecord(std::string_view data);

// A serialized Event{wall_time, file_version: "brain.Event:2"}.
std::string FileVersionEvent(double wall_time);

// A serialized Event{wall_time, step, summary{value{tag, simple_value}...}}.
std::string ScalarsEvent(double wall_time, int64_t step, const std::vector<TaggedScalar>& scalars);

}  // namespace conveyor

#endif  // CONVEYOR_COMMON_EVENT_FILE_WRITER_H_
