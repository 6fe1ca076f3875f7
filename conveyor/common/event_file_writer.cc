#include "conveyor/common/event_file_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "conveyor/common/checksum.h"
#include "conveyor/common/error.h"

namespace conveyor {
namespace {

// Protocol-buffer wire types.
constexpr int kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

void PutVarint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void PutKey(std::string& out, int field, int wire_type) {
  PutVarint(out, static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(wire_type));
}

void PutLittleEndian(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>(value >> (8 * i) & 0xff));
}

void PutBytesField(std::string& out, int field, std::string_view bytes) {
  PutKey(out, field, kLengthDelimited);
  PutVarint(out, bytes.size());
  out.append(bytes);
}

void PutDoubleField(std::string& out, int field, double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  PutKey(out, field, kFixed64);
  PutLittleEndian(out, bits, 8);
}

void PutFloatField(std::string& out, int field, float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  PutKey(out, field, kFixed32);
  PutLittleEndian(out, bits, 4);
}

// tensorflow.Event's fields, and those of Summary and Summary.Value.
constexpr int kEventWallTime = 1, kEventStep = 2, kEventFileVersion = 3, kEventSummary = 5;
constexpr int kSummaryValue = 1;
constexpr int kValueTag = 1, kValueSimpleValue = 2;

std::string EventHead(double wall_time) {
  std::string event;
  PutDoubleField(event, kEventWallTime, wall_time);
  return event;
}

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The machine's name, its characters outside [A-Za-z0-9._-] replaced by '_' (it ends a file
// name); "localhost" when it has none.
std::string HostName() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') return "localhost";
  std::string name(host);
  for (char& c : name) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '.' || c == '_' || c == '-';
    if (!plain) c = '_';
  }
  return name;
}

}  // namespace

uint32_t MaskedCrc32c(const void* data, size_t bytes) {
  const uint32_t crc = Crc32c(data, bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string FrameRecord(std::string_view data) {
  std::string record;
  record.reserve(data.size() + 16);
  PutLittleEndian(record, data.size(), 8);
  PutLittleEndian(record, MaskedCrc32c(record.data(), 8), 4);
  record.append(data);
  PutLittleEndian(record, MaskedCrc32c(data.data(), data.size()), 4);
  return record;
}

std::string FileVersionEvent(double wall_time) {
  std::string event = EventHead(wall_time);
  PutBytesField(event, kEventFileVersion, "brain.Event:2");
  return event;
}

std::string ScalarsEvent(double wall_time, int64_t step, const std::vector<TaggedScalar>& scalars) {
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    std::string entry;
    PutBytesField(entry, kValueTag, tag);
    PutFloatField(entry, kValueSimpleValue, static_cast<float>(value));
    PutBytesField(summary, kSummaryValue, entry);
  }
  std::string event = EventHead(wall_time);
  PutKey(event, kEventStep, kVarint);
  PutVarint(event, static_cast<uint64_t>(step));  // int64: two's complement, as protobuf does
  PutBytesField(event, kEventSummary, summary);
  return event;
}

EventFileWriter::EventFileWriter(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  CONVEYOR_CHECK(!error) << "cannot create the TensorBoard folder '" << dir
                         << "': " << error.message();
  const double now = Now();
  const std::string base =
      (std::filesystem::path(dir) /
       ("events.out.tfevents." + std::to_string(static_cast<int64_t>(now)) + "." + HostName()))
          .string();
  for (int n = 0; fd_ < 0; ++n) {
    path_ = n == 0 ? base : base + "." + std::to_string(n);
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0666);
    const int reason = errno;
    CONVEYOR_CHECK(fd_ >= 0 || (reason == EEXIST && n < 1000))
        << "cannot create the TensorBoard file '" << path_ << "': " << std::strerror(reason);
  }
  try {
    Append(FrameRecord(FileVersionEvent(now)));
  } catch (...) {
    ::close(fd_);  // the destructor does not run when the constructor throws
    throw;
  }
}

EventFileWriter::~EventFileWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void EventFileWriter::Write(int64_t step, const std::vector<TaggedScalar>& scalars) {
  if (scalars.empty()) return;
  Append(FrameRecord(ScalarsEvent(Now(), step, scalars)));
}

void EventFileWriter::Append(const std::string& record) {
  size_t done = 0;
  while (done < record.size()) {
    const ssize_t n = ::write(fd_, record.data() + done, record.size() - done);
    if (n < 0 && errno == EINTR) continue;
    const int reason = errno;
    CONVEYOR_CHECK(n > 0) << "cannot write the TensorBoard file '" << path_
                          << "': " << (n == 0 ? "nothing written" : std::strerror(reason));
    done += static_cast<size_t>(n);
  }
}

}  // namespace conveyor
