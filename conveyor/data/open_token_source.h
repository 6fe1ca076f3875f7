// Token sources by path, as --data names them (token_source.h).
#ifndef CONVEYOR_DATA_OPEN_TOKEN_SOURCE_H_
#define CONVEYOR_DATA_OPEN_TOKEN_SOURCE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "conveyor/data/token_source.h"

namespace conveyor {

// Whether `path` names a token source: PREFIX.bin and PREFIX.idx exist, or `path` is a file
// whose name ends in .bin.
bool IsTokenSource(const std::string& path);

// Opens it: an indexed data set when PREFIX.idx exists, else a flat token file. Throws
// UserError for a path that names no token source, as their constructors do, and for an
// indexed data set whose sequences are not stored back to back (not one stream). What train,
// eval and `data check` open data with: one set of checks.
std::shared_ptr<const TokenSource> OpenTokenSource(const std::string& path);

// A loss mask: which tokens of a data set are targets (supervised data, `data prepare
// --supervised`), stored as a data set of its own beside it, PREFIX_loss_mask.bin / .idx, of
// uint8 0 or 1 per token, its documents the data set's (so that Megatron-style readers read
// both). Token j of the stream counts in the loss, predicted from the tokens before it, when
// the mask's token j is 1.
std::string LossMaskPrefix(const std::string& prefix);

// The loss mask of `data`, opened from `path` (--data's PREFIX): null when there is none (or
// `data` is a token file). Throws UserError naming both when the mask is not contiguous or its
// documents differ from the data set's in count or length.
std::shared_ptr<const TokenSource> OpenLossMask(const std::string& path, const TokenSource& data);

// Reads loss-mask entries [offset, offset + count) of `mask` into `out`; UserError naming the
// file and position of an entry that is neither 0 nor 1.
void ReadLossMask(const TokenSource& mask, int64_t offset, int64_t count, int64_t* out);

// Reads the whole stream of `data`, a chunk at a time, and checks every token as a run reads
// it (TokenSource::CheckTokens): UserError naming the first outside [0, vocab_size).
void CheckEveryToken(const TokenSource& data, int64_t vocab_size);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_OPEN_TOKEN_SOURCE_H_
