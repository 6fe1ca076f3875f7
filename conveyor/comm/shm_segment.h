// ShmSegment: one POSIX shared-memory segment in ShmChannel's layout, and ShmRing, a view of
// one of its byte rings. Internal to ShmChannel (see shm_channel.h for the protocol); torch-free.
//
// Layout of a segment of R rings of B bytes each:
//   [SegmentHeader, padded to 4096 bytes] then R times [RingControl, padded to 256 bytes][B bytes]
// The header is written once by the creator (magic, sizes) except its futex words; each
// RingControl holds the ring's producer and consumer counters.
//
// Ownership: a ShmSegment owns its mapping (unmapped when destroyed) and, when it created the
// name, the name too (unlinked at the latest when destroyed). Not thread-safe by itself; the
// atomics inside are shared with other processes through std::atomic_ref.
#ifndef CONVEYOR_COMM_SHM_SEGMENT_H_
#define CONVEYOR_COMM_SHM_SEGMENT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace conveyor {

// The first page of a segment.
struct ShmSegmentHeader {
  static constexpr std::uint64_t kMagic = 0x636f6e7665796f72;  // "conveyor"
  std::uint64_t magic;
  std::uint64_t ring_bytes;
  std::uint64_t rings;
  alignas(64) std::uint32_t doorbell;  // futex word: bumped to wake the segment's owner
  alignas(64) std::uint32_t waiters;   // threads of the owner sleeping (or about to)
};

// The control block before each ring's bytes. head: bytes ever written (producer), tail:
// bytes ever read (consumer), want_space: the producer is blocked on a full ring.
struct ShmRingControl {
  alignas(64) std::uint64_t head;
  alignas(64) std::uint64_t tail;
  alignas(64) std::uint32_t want_space;
};

class ShmSegment {
 public:
  // Creates (O_EXCL, 0600) and reserves (posix_fallocate), or opens and checks the size of,
  // the segment `name` of `bytes` and maps it pre-faulted. Throws std::runtime_error with the
  // reason.
  static std::unique_ptr<ShmSegment> Map(const std::string& name, std::size_t bytes, bool create);

  // This host and shared-memory namespace, for telling which ranks can map each other's
  // segments: host name, boot id, PID and network namespaces (ranks in other network
  // namespaces count as other hosts, so the network between them is used) and the device
  // of /dev/shm ("" when /dev/shm is unusable).
  static std::string HostIdentity();

  // Bytes of a segment holding `rings` rings of `ring_bytes`.
  static std::size_t Bytes(std::size_t rings, std::size_t ring_bytes);
  // The shm_open name of `rank`'s segment in run `run`.
  static std::string Name(const std::string& run, int rank);

  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  // Removes the name (when this segment created it); the mapping stays. Idempotent.
  void Unlink();

  ShmSegmentHeader& header();
  ShmRingControl& control(std::size_t slot, std::size_t ring_bytes);
  std::byte* data(std::size_t slot, std::size_t ring_bytes);

 private:
  ShmSegment() = default;

  std::string name_;
  std::byte* base_ = nullptr;
  std::size_t bytes_ = 0;
  bool linked_ = false;
};

// One ring of a mapped segment: positions are byte counts since the start, taken modulo the
// capacity.
struct ShmRing {
  ShmRingControl* control = nullptr;
  std::byte* data = nullptr;
  std::uint64_t capacity = 0;

  // Copies `n` <= capacity bytes in at, or out from, `position`, wrapping around the end.
  void CopyIn(std::uint64_t position, const std::byte* from, std::uint64_t n);
  void CopyOut(std::uint64_t position, std::byte* to, std::uint64_t n) const;
};

}  // namespace conveyor

#endif  // CONVEYOR_COMM_SHM_SEGMENT_H_
