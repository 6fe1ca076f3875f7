#include "conveyor/common/env.h"

#include <charconv>
#include <cstdlib>

#include "conveyor/common/error.h"
#include "conveyor/common/range_check.h"

extern char** environ;

namespace conveyor {
namespace {

std::string Described(std::string_view name) { return "environment variable " + std::string(name); }

}  // namespace

Environment ProcessEnvironment() {
  Environment env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view text = *entry;
    const size_t eq = text.find('=');
    if (eq != std::string_view::npos) {
      env.emplace(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
    }
  }
  return env;
}

int64_t ParseEnvInt(std::string_view name, std::string_view value, int64_t min, int64_t max) {
  int64_t parsed = 0;
  const char* end = value.data() + value.size();
  const auto [ptr, ec] = std::from_chars(value.data(), end, parsed);
  CONVEYOR_CHECK(ec == std::errc() && ptr == end)
      << Described(name) << "=\"" << value << "\" is not an integer";
  CheckInRange(Described(name), parsed, min, max);
  return parsed;
}

int64_t EnvInt(const char* name, int64_t fallback, int64_t min, int64_t max) {
  const char* value = std::getenv(name);
  return value == nullptr ? fallback : ParseEnvInt(name, value, min, max);
}

bool EnvFlag(const char* name, bool fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr) return fallback;
  const std::string_view value = text;
  if (value == "1" || value == "on" || value == "true" || value == "yes") return true;
  if (value == "0" || value == "off" || value == "false" || value == "no") return false;
  CONVEYOR_CHECK(false) << Described(name) << "=\"" << value
                        << "\" is not a switch (1, on, true, yes / 0, off, false, no)";
  return fallback;
}

}  // namespace conveyor
