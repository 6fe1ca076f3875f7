#include "conveyor/common/byte_size.h"

#include "conveyor/common/text.h"

namespace conveyor {

std::string ByteSize(double bytes) {
  return bytes >= (1 << 30) ? Printf("%.1f GiB", bytes / (1 << 30))
                            : Printf("%.1f MiB", bytes / (1 << 20));
}

}  // namespace conveyor
