// The version of this build of conveyor: the project's version and, when it was built from a
// git checkout, the commit it was configured at ("0.25.0+g4a83106", "+dirty" for local
// changes). `conveyor --version` prints it; the ranks of a run compare it at rendezvous.
#ifndef CONVEYOR_COMMON_VERSION_H_
#define CONVEYOR_COMMON_VERSION_H_

#include <string>

namespace conveyor {

std::string ConveyorVersion();

}  // namespace conveyor

#endif  // CONVEYOR_COMMON_VERSION_H_
