// Fuzz target: a safetensors file (conveyor/formats/safetensors.h): LoadSafetensorsHeader, then
// LoadSafetensors. Every input is either refused with a UserError by both, or loads, with the
// tensors the header describes. Anything else (a crash, another exception, a sanitizer
// report, a size field that makes it allocate past the run's -rss_limit_mb) is a finding.
#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>

#include "conveyor/common/error.h"
#include "conveyor/formats/safetensors.h"
#include "fuzz/scratch_dir.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace conveyor;
  static const fuzz::ScratchDir scratch;
  const std::string path = scratch.Write("input.safetensors", data, size);
  SafetensorsHeader header;
  try {
    header = LoadSafetensorsHeader(path);
  } catch (const UserError&) {
    // The whole file must be refused too.
    try {
      LoadSafetensors(path);
    } catch (const UserError&) {
      return 0;
    }
    CONVEYOR_ASSERT(false) << "the header is refused but the file loads";
  }
  try {
    const SafetensorsFile file = LoadSafetensors(path);
    CONVEYOR_ASSERT(file.tensors.size() == header.tensors.size() &&
                    file.metadata == header.metadata)
        << "the file holds other tensors or metadata than its header";
    for (const auto& [name, tensor] : file.tensors) {
      CONVEYOR_ASSERT(tensor.sizes().vec() == header.tensors.at(name).shape)
          << "tensor '" << name << "' has another shape than its header says";
    }
  } catch (const UserError&) {
    // Only the data can be refused once the header was accepted: BOOL bytes other than 0/1.
  }
  return 0;
}
