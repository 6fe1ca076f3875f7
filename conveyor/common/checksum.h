// Checksums of byte ranges, for detecting corrupt files (not for security: anyone can forge
// them).
#ifndef CONVEYOR_COMMON_CHECKSUM_H_
#define CONVEYOR_COMMON_CHECKSUM_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace conveyor {

// The 64-bit FNV-1a hash of `bytes` bytes at `data`. Any change confined to one byte changes it.
// Pure; safe from any thread.
uint64_t Fnv1a64(const void* data, size_t bytes);

// The CRC-32C (Castagnoli: reflected polynomial 0x82f63b78, initial value and final xor
// 0xffffffff) of `bytes` bytes at `data`, the checksum of iSCSI, ext4 and TFRecord files.
// Pure; safe from any thread.
uint32_t Crc32c(const void* data, size_t bytes);

// `value` as 16 lowercase hexadecimal digits, the form checksums take in JSON files.
std::string Hex64(uint64_t value);

}  // namespace conveyor

#endif  // CONVEYOR_COMMON_CHECKSUM_H_
