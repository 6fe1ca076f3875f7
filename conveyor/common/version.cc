#include "conveyor/common/version.h"

namespace conveyor {

std::string ConveyorVersion() { return CONVEYOR_VERSION; }

}  // namespace conveyor
