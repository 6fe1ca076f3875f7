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

// Reads the whole stream of `data`, a chunk at a time, and checks every token as a run reads
// it (TokenSource::CheckTokens): UserError naming the first outside [0, vocab_size).
void CheckEveryToken(const TokenSource& data, int64_t vocab_size);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_OPEN_TOKEN_SOURCE_H_
