// What a process was doing when a refusal stopped it, put in front of the refusal's own line:
// "rank 0, stage 1, building its layers: memory limit: ...", as the executor names the action
// a refusal stops (runtime/executor.h).
//
// Thread-safety: a pure function of its arguments.
#ifndef CONVEYOR_COMMON_ERROR_CONTEXT_H_
#define CONVEYOR_COMMON_ERROR_CONTEXT_H_

#include <string>
#include <string_view>
#include <utility>

#include "conveyor/common/error.h"

namespace conveyor {

// Returns work(); a UserError it throws is thrown again as "<context>: <its message>". Other
// exceptions pass unchanged.
template <typename Work>
decltype(auto) WithErrorContext(std::string_view context, Work&& work) {
  try {
    return std::forward<Work>(work)();
  } catch (const UserError& e) {
    throw UserError(std::string(context) + ": " + e.what());
  }
}

}  // namespace conveyor

#endif  // CONVEYOR_COMMON_ERROR_CONTEXT_H_
