#include "conveyor/sim/recompute.h"

#include "conveyor/common/spellings.h"

namespace conveyor {
namespace {

constexpr Spellings<Recompute, 3> kRecomputes = {{
    {Recompute::kNone, "none"},
    {Recompute::kFull, "full"},
    {Recompute::kSelective, "selective"},
}};

}  // namespace

Recompute ParseRecompute(std::string_view text, std::string_view name) {
  return ParseSpelling(kRecomputes, text, name);
}

std::string_view RecomputeName(Recompute recompute) { return SpellingOf(kRecomputes, recompute); }

}  // namespace conveyor
