// Fuzz target: ParseAction (conveyor/schedule/action.h), the text form of one action, in
// both namings. Any text either parses or is refused with a UserError; an action that parses
// prints as text that parses back to the same action. Anything else (a crash, another
// exception, a sanitizer report) is a finding.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "conveyor/common/error.h"
#include "conveyor/schedule/action.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using conveyor::Action;
  using conveyor::Naming;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const Naming naming : {Naming::kCurrent, Naming::kLegacy}) {
    std::optional<Action> action;
    try {
      action = conveyor::ParseAction(text, naming);
    } catch (const conveyor::UserError&) {
      continue;
    }
    // ToString writes the current naming.
    const std::string printed = action->ToString();
    CONVEYOR_ASSERT(conveyor::ParseAction(printed) == *action)
        << "'" << text << "' parses, prints as '" << printed << "', which parses differently";
  }
  return 0;
}
