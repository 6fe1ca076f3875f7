// Token sources by path, as --data names them (token_source.h).
#ifndef CONVEYOR_DATA_OPEN_TOKEN_SOURCE_H_
#define CONVEYOR_DATA_OPEN_TOKEN_SOURCE_H_

#include <memory>
#include <string>

#include "conveyor/data/token_source.h"

namespace conveyor {

// Whether `path` names a token source: PREFIX.bin and PREFIX.idx exist, or `path` is a file
// whose name ends in .bin.
bool IsTokenSource(const std::string& path);

// Opens it: an indexed data set when PREFIX.idx exists, else a flat token file. Throws
// UserError as their constructors do, and for an indexed data set whose sequences are not
// stored back to back (not one stream).
std::shared_ptr<const TokenSource> OpenTokenSource(const std::string& path);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_OPEN_TOKEN_SOURCE_H_
