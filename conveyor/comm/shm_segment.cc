#include "conveyor/comm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace conveyor {
namespace {

constexpr std::size_t kHeaderBytes = 4096;
constexpr std::size_t kControlBytes = 256;
static_assert(sizeof(ShmSegmentHeader) <= kHeaderBytes);
static_assert(sizeof(ShmRingControl) <= kControlBytes);
static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free);
static_assert(std::atomic_ref<std::uint32_t>::is_always_lock_free);

}  // namespace

std::unique_ptr<ShmSegment> ShmSegment::Map(const std::string& name, std::size_t bytes,
                                            bool create) {
  std::unique_ptr<ShmSegment> segment(new ShmSegment());
  segment->name_ = name;
  int fd = shm_open(name.c_str(), create ? O_CREAT | O_EXCL | O_RDWR : O_RDWR, 0600);
  if (fd < 0) throw std::runtime_error("shm_open " + name + ": " + std::strerror(errno));
  segment->linked_ = create;
  int rc = 0;
  if (create) {
    // posix_fallocate reserves the pages now: tmpfs running out later would be a SIGBUS.
    rc = ftruncate(fd, static_cast<off_t>(bytes)) == 0
             ? posix_fallocate(fd, 0, static_cast<off_t>(bytes))
             : errno;
  } else {
    struct stat st {};
    if (fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) != bytes) rc = EINVAL;
  }
  // MAP_POPULATE: page faults on the rings would cost a first pass through them ~10x.
  void* base = rc == 0
                   ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0)
                   : MAP_FAILED;
  if (base == MAP_FAILED && rc == 0) rc = errno;
  close(fd);
  if (rc != 0) {
    throw std::runtime_error((create ? "reserving " : "mapping ") + std::to_string(bytes) +
                             " bytes of " + name + " in /dev/shm: " + std::strerror(rc));
  }
  segment->base_ = static_cast<std::byte*>(base);
  segment->bytes_ = bytes;
  return segment;
}

std::string ShmSegment::HostIdentity() {
  struct stat st {};
  if (stat("/dev/shm", &st) != 0) return "";
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  auto name_space = [](const char* path) {
    char target[128] = {};
    return readlink(path, target, sizeof(target) - 1) < 0 ? std::string() : std::string(target);
  };
  // The network namespace too: ranks in different ones (containers, or the simulated nodes
  // of the fault tests) talk over the network even when they could share memory.
  std::ostringstream id;
  id << host << '|' << boot << '|' << name_space("/proc/self/ns/pid") << '|'
     << name_space("/proc/self/ns/net") << "|shm dev " << st.st_dev;
  return id.str();
}

std::size_t ShmSegment::Bytes(std::size_t rings, std::size_t ring_bytes) {
  return kHeaderBytes + rings * (kControlBytes + ring_bytes);
}

std::string ShmSegment::Name(const std::string& run, int rank) {
  return "/conveyor-" + run + "-" + std::to_string(rank);
}

ShmSegment::~ShmSegment() {
  if (base_ != nullptr) munmap(base_, bytes_);
  Unlink();
}

void ShmSegment::Unlink() {
  if (linked_) shm_unlink(name_.c_str());
  linked_ = false;
}

ShmSegmentHeader& ShmSegment::header() { return *reinterpret_cast<ShmSegmentHeader*>(base_); }

ShmRingControl& ShmSegment::control(std::size_t slot, std::size_t ring_bytes) {
  return *reinterpret_cast<ShmRingControl*>(base_ + kHeaderBytes +
                                            slot * (kControlBytes + ring_bytes));
}

std::byte* ShmSegment::data(std::size_t slot, std::size_t ring_bytes) {
  return reinterpret_cast<std::byte*>(&control(slot, ring_bytes)) + kControlBytes;
}

void ShmRing::CopyIn(std::uint64_t position, const std::byte* from, std::uint64_t n) {
  if (n == 0) return;
  std::uint64_t offset = position % capacity;
  std::uint64_t first = std::min(n, capacity - offset);
  std::memcpy(data + offset, from, first);
  std::memcpy(data, from + first, n - first);
}

void ShmRing::CopyOut(std::uint64_t position, std::byte* to, std::uint64_t n) const {
  if (n == 0) return;
  std::uint64_t offset = position % capacity;
  std::uint64_t first = std::min(n, capacity - offset);
  std::memcpy(to, data + offset, first);
  std::memcpy(to + first, data, n - first);
}

}  // namespace conveyor
