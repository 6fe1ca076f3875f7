// A fingerprint of what a path holds, for ranks on different machines to tell whether they
// read the same model and data: the same path can hold other contents on another node (a
// stale copy, another fine-tune), and comparing paths would not see it.
//
// Cheap enough to take at every start, for folders of many gigabytes: each regular file
// counts with its name (relative to the path), its size, and 64 KiB read at 64 places spread
// evenly over it (the whole file when it is smaller than that): any difference in the
// files' names or sizes, and in practice any other weights or data, changes it. A change
// confined to bytes between the samples does not; that is what checksums are for
// (train/checkpoint.h).
//
// Not for security: anyone can forge it. Thread-safety: reentrant.
#ifndef CONVEYOR_COMMON_FILE_FINGERPRINT_H_
#define CONVEYOR_COMMON_FILE_FINGERPRINT_H_

#include <string>

namespace conveyor {

// 16 hexadecimal digits for what `path` names: a file; a folder (every regular file under
// it, in name order; links to files followed, links to folders not); or, where nothing is at
// `path`, the files of its folder whose names start with its name and a '.' (a data set's
// PREFIX.bin and PREFIX.idx). "none" when nothing is found, "unreadable" when a file cannot be
// read. Never throws.
std::string FileFingerprint(const std::string& path);

}  // namespace conveyor

#endif  // CONVEYOR_COMMON_FILE_FINGERPRINT_H_
