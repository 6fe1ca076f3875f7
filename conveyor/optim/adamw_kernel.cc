#include "conveyor/optim/adamw_kernel.h"

#include "conveyor/common/spellings.h"

namespace conveyor {
namespace {

constexpr Spellings<AdamWKernel, 4> kAdamWKernels = {{
    {AdamWKernel::kAuto, "auto"},
    {AdamWKernel::kLoop, "loop"},
    {AdamWKernel::kForEach, "foreach"},
    {AdamWKernel::kFused, "fused"},
}};

}  // namespace

AdamWKernel ParseAdamWKernel(std::string_view text, std::string_view name) {
  return ParseSpelling(kAdamWKernels, text, name);
}

std::string_view AdamWKernelName(AdamWKernel kernel) { return SpellingOf(kAdamWKernels, kernel); }

}  // namespace conveyor
