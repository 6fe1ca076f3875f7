// Fuzz target: a Megatron indexed data set (conveyor/data/indexed_dataset.h) and a flat token
// file (flat_token_file.h: llm.c, nanoGPT). The input's first two bytes give the length L of
// PREFIX.idx (little-endian); PREFIX.idx is the next L bytes (fewer when the input ends),
// PREFIX.bin the rest. Every pair is either refused with a UserError when opened, or opens,
// and then every sequence, every document and, for a contiguous one, the whole stream read
// back within the files' bounds and checked against a vocabulary. The whole input is also read as a
// flat token file: refused, or every part and token read back. Anything else (a crash, another
// exception, a sanitizer report) is a finding.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/data/flat_token_file.h"
#include "conveyor/data/indexed_dataset.h"
#include "conveyor/data/open_token_source.h"
#include "fuzz/scratch_dir.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace conveyor;
  static const fuzz::ScratchDir scratch;
  if (size < 2) return 0;
  const size_t index = std::min(size - 2, static_cast<size_t>(data[0] | data[1] << 8));
  scratch.Write("set.idx", data + 2, index);
  scratch.Write("set.bin", data + 2 + index, size - 2 - index);
  try {
    const IndexedDataset set(scratch.path() + "/set");
    for (int64_t i = 0; i < set.num_sequences(); ++i) set.Read(i);
    for (int64_t j = 0; j < set.num_documents(); ++j) {
      CONVEYOR_ASSERT(set.document_first(j) <= set.document_end(j)) << "documents fall";
    }
    if (set.contiguous() && set.num_tokens() > 0) {
      std::vector<int64_t> stream(set.num_tokens());
      set.ReadStream(0, set.num_tokens(), stream.data());
      CONVEYOR_ASSERT(set.DocumentAt(set.num_tokens() - 1) < set.num_documents())
          << "the last token belongs to no document";
      CheckEveryToken(set, 256);  // a token outside is a UserError naming its document
    }
  } catch (const UserError&) {
  }
  scratch.Write("flat.bin", data, size);
  try {
    const FlatTokenFile flat(scratch.path() + "/flat.bin");
    std::vector<int64_t> tokens(flat.num_tokens());
    flat.ReadStream(0, flat.num_tokens(), tokens.data());
    for (int64_t j = 0; j < flat.num_documents(); ++j) {
      CONVEYOR_ASSERT(flat.DocumentOffset(j) < flat.DocumentOffset(j + 1)) << "an empty part";
    }
    CONVEYOR_ASSERT(flat.DocumentOffset(flat.num_documents()) == flat.num_tokens()) << "parts";
  } catch (const UserError&) {
  }
  return 0;
}
