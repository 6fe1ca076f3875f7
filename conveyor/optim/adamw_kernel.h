// The kernels AdamW's update can run through (AdamW::UpdateAll, optimizer.h), as a setting.
//
// kLoop: a tensor at a time, five kernels each (the reference path). kForEach: libtorch's
// multi-tensor kernels, a few launches for many tensors (the square-root denominators of a
// chunk of tensors held at once: AdamWOptions::foreach_chunk_bytes). kFused: libtorch's fused
// AdamW, one pass over each tensor (libtorch 2.4 and later, CPU and GPU). kAuto: kFused where
// libtorch has it, else kForEach on a GPU and kLoop on the CPU, where the multi-tensor kernels
// stream every tensor through memory once a kernel (ResolveAdamWKernel). All give the same update up to
// rounding: the fused kernel divides sqrt(v) by sqrt(1 - beta2^t) where the others take
// sqrt(v / (1 - beta2^t)).
//
// Thread-safety: pure functions.
#ifndef CONVEYOR_OPTIM_ADAMW_KERNEL_H_
#define CONVEYOR_OPTIM_ADAMW_KERNEL_H_

#include <cstdint>
#include <string_view>

namespace conveyor {

enum class AdamWKernel : uint8_t { kAuto, kLoop, kForEach, kFused };

// `text` ("auto", "loop", "foreach", "fused") as an AdamWKernel; UserError naming `name` (the
// flag, or the file and key) and the allowed words otherwise.
AdamWKernel ParseAdamWKernel(std::string_view text, std::string_view name);
std::string_view AdamWKernelName(AdamWKernel kernel);

}  // namespace conveyor

#endif  // CONVEYOR_OPTIM_ADAMW_KERNEL_H_
