// Sizes in bytes as people read them, for reports and messages.
#ifndef CONVEYOR_COMMON_BYTE_SIZE_H_
#define CONVEYOR_COMMON_BYTE_SIZE_H_

#include <string>

namespace conveyor {

// "37.3 GiB" from 1 GiB on, else "112.6 MiB".
std::string ByteSize(double bytes);

}  // namespace conveyor

#endif  // CONVEYOR_COMMON_BYTE_SIZE_H_
