// The words users write for an enum's values ("cpu", "bf16", ...), and the two lookups every
// setting of that kind needs: from text, naming the allowed words when it is none of them,
// and back.
//
// Thread-safety: pure functions over constant tables.
#ifndef CONVEYOR_COMMON_SPELLINGS_H_
#define CONVEYOR_COMMON_SPELLINGS_H_

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "conveyor/common/error.h"

namespace conveyor {

// The spellings of an enum's values, as users write them, in the order they are listed.
template <typename E, size_t N>
using Spellings = std::array<std::pair<E, std::string_view>, N>;

// The value spelt `text`; UserError "<name> must be a, b or c, got '<text>'" otherwise.
template <typename E, size_t N>
E ParseSpelling(const Spellings<E, N>& spellings, std::string_view text, std::string_view name) {
  std::string allowed;
  for (size_t i = 0; i < N; ++i) {
    if (spellings[i].second == text) return spellings[i].first;
    allowed += i == 0 ? "" : (i + 1 == N ? " or " : ", ");
    allowed += spellings[i].second;
  }
  CONVEYOR_CHECK(false) << name << " must be " << allowed << ", got '" << text << "'";
}

// The spelling of `value`; InternalError when the table lacks it.
template <typename E, size_t N>
std::string_view SpellingOf(const Spellings<E, N>& spellings, E value) {
  for (const auto& [v, spelling] : spellings) {
    if (v == value) return spelling;
  }
  CONVEYOR_ASSERT(false) << "no spelling for value " << static_cast<int>(value);
}

}  // namespace conveyor

#endif  // CONVEYOR_COMMON_SPELLINGS_H_
