#include "conveyor/sim/model_spec.h"

#include "conveyor/common/error.h"
#include "conveyor/common/range_check.h"
#include "conveyor/common/spellings.h"

namespace conveyor {
namespace {

constexpr Spellings<ModelKind, 3> kModelKinds = {{
    {ModelKind::kGpt, "gpt"},
    {ModelKind::kClassifier, "classifier"},
    {ModelKind::kLlama, "llama"},
}};

}  // namespace

ModelKind ParseModelKind(std::string_view text, std::string_view name) {
  return ParseSpelling(kModelKinds, text, name);
}

std::string_view ModelKindName(ModelKind kind) { return SpellingOf(kModelKinds, kind); }

bool IsModelKindName(std::string_view text) {
  for (const auto& [kind, spelling] : kModelKinds) {
    if (spelling == text) return true;
  }
  return false;
}

void SetModelInteger(ModelSpec& spec, std::string_view key, int64_t value, std::string_view name) {
  bool found = false;
  ForEachModelInteger(spec, [&](std::string_view k, int& field, int64_t lo, int64_t hi) {
    if (k != key) return;
    CheckInRange(name, value, lo, hi);
    field = static_cast<int>(value);
    found = true;
  });
  CONVEYOR_ASSERT(found) << "no integer model field '" << key << "'";
}

void SetModelReal(ModelSpec& spec, std::string_view key, double value, std::string_view name) {
  bool found = false;
  ForEachModelReal(spec,
                   [&](std::string_view k, double& field, std::optional<double> lo, double hi) {
                     if (k != key) return;
                     CheckInRealRange(name, value, lo, hi);
                     field = value;
                     found = true;
                   });
  CONVEYOR_ASSERT(found) << "no real model field '" << key << "'";
}

}  // namespace conveyor
