// Paths a user names (a --data file or folder, an --input, a config file), checked before
// they are opened, so that a folder given where a file is read, a loop of symbolic links or
// a device stops the command with one line naming the flag and the path, never the standard
// library's "basic_filebuf::underflow error" or "filesystem error" lines.
//
// Thread-safety: functions of the file system alone; safe from any thread.
#ifndef CONVEYOR_COMMON_INPUT_PATH_H_
#define CONVEYOR_COMMON_INPUT_PATH_H_

#include <string>
#include <string_view>

namespace conveyor {

// What a path must be, its symbolic links followed.
enum class PathKind { kFile, kFolder, kFileOrFolder };

// Throws UserError "FLAG PATH: ..." (`flag` is what named the path: "--data", "config file")
// unless `path` is a `kind` this process may read: it does not exist (or is a symbolic link to
// nothing), its links loop, a folder on the way cannot be searched, it is a folder where a file
// is read or a file where a folder is, it is neither (a device, a pipe, a socket), or it cannot
// be read.
void CheckInputPath(std::string_view flag, const std::string& path, PathKind kind);

// The whole of the file `path`, after CheckInputPath(flag, path, PathKind::kFile). UserError
// naming the flag and the path when it cannot be read.
std::string ReadInputFile(std::string_view flag, const std::string& path);

}  // namespace conveyor

#endif  // CONVEYOR_COMMON_INPUT_PATH_H_
