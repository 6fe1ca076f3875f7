// RemoveTree: removes a file or a folder with everything in it, the way
// std::filesystem::remove_all does, without std::filesystem::remove_all.
//
// Why: a pip PyTorch's libtorch exports its own copy of remove_all (linked in from its build
// compiler's libstdc++), which calls recursive_directory_iterator members that the host's
// libstdc++ may lack; they resolve to null and remove_all of a non-empty folder crashes the
// process (seen on a lent H200: PyTorch 2.11 built with GCC 13.3 on Red Hat, the host's
// GCC 13.3 on Ubuntu). Every removal of a folder tree in conveyor goes through here.
//
// Symbolic links are removed, never followed. A path that does not exist is not an error
// (nothing is removed). The walk is POSIX nftw, depth first.
//
// Thread-safety: safe to call from any thread; two calls on overlapping trees race as two
// `rm -rf` would.
#ifndef CONVEYOR_COMMON_REMOVE_TREE_H_
#define CONVEYOR_COMMON_REMOVE_TREE_H_

#include <cstdint>
#include <filesystem>
#include <system_error>

namespace conveyor {

// Removes `path` and everything under it; returns how many entries were removed. Stops at
// the first entry it cannot remove and sets `error` (cleared on success).
std::uintmax_t RemoveTree(const std::filesystem::path& path, std::error_code& error) noexcept;

// As above; throws std::filesystem::filesystem_error naming `path` and the reason.
std::uintmax_t RemoveTree(const std::filesystem::path& path);

}  // namespace conveyor

#endif  // CONVEYOR_COMMON_REMOVE_TREE_H_
