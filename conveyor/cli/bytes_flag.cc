#include "conveyor/cli/bytes_flag.h"

#include <cmath>
#include <string>

namespace conveyor {

CLI::Validator BytesFlag() {
  const CLI::AsSizeValue units(/*kb_is_1000=*/true);
  return CLI::Validator(
      [units](std::string& value) -> std::string {
        try {
          size_t used = 0;
          const double bytes = std::stod(value, &used);
          if (used == value.size()) {
            if (!std::isfinite(bytes) || bytes < 0 || bytes > 1e18) {
              return "bytes must be a number in [0, 1e18], not " + value;
            }
            value = std::to_string(std::llround(bytes));
            return "";
          }
        } catch (const std::exception&) {  // not a plain number: a size with a unit
        }
        try {
          return units(value);
        } catch (const CLI::ValidationError& e) {  // an unknown unit
          return e.what();
        }
      },
      "BYTES");
}

}  // namespace conveyor
