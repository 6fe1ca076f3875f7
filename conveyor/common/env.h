// Settings read from environment variables, strictly: a variable that is set to something
// malformed is a UserError naming the variable and its value, never read as 0 or ignored.
//
//   environment variable RANK="x1" is not an integer
//   environment variable MASTER_PORT must be within [1, 65535], got 70000
//
// Thread-safety: ParseEnvInt is pure. The others read the process environment, which must
// not change concurrently (setenv/unsetenv on another thread).
#ifndef CONVEYOR_COMMON_ENV_H_
#define CONVEYOR_COMMON_ENV_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace conveyor {

// Variables by name: a copy of an environment, or one a test makes up.
using Environment = std::map<std::string, std::string>;

// A copy of this process's environment.
Environment ProcessEnvironment();

// `value`, the value of variable `name`, as a decimal integer (an optional '-' and digits,
// nothing else) within [min, max]. Throws UserError naming both otherwise.
int64_t ParseEnvInt(std::string_view name, std::string_view value, int64_t min, int64_t max);

// The integer in the process's variable `name` (ParseEnvInt), or `fallback` when it is not
// set. `fallback` need not lie within [min, max] (a caller may use it to mean "unset").
int64_t EnvInt(const char* name, int64_t fallback, int64_t min, int64_t max);

// The switch in the process's variable `name`: "1", "on", "true" or "yes" for true, "0",
// "off", "false" or "no" for false, `fallback` when it is not set. Throws UserError naming
// the variable and value for anything else.
bool EnvFlag(const char* name, bool fallback);

}  // namespace conveyor

#endif  // CONVEYOR_COMMON_ENV_H_
