#include "conveyor/formats/tensor_source.h"

#include <ATen/ATen.h>

#include "conveyor/common/error.h"
#include "conveyor/formats/safetensors.h"

namespace conveyor {

void CheckFinite(const void* data, int64_t count, at::ScalarType dtype, const std::string& where,
                 const std::string& name) {
  // A view of the caller's bytes: nothing is copied or freed.
  const at::Tensor values =
      at::from_blob(const_cast<void*>(data), {count}, at::TensorOptions().dtype(dtype));
  const int64_t nonfinite = NonFiniteCount(values);
  CONVEYOR_CHECK(nonfinite == 0) << where << "tensor '" << name
                                 << "' holds NaN or infinite values (" << nonfinite << " of the "
                                 << count << " read)";
}

}  // namespace conveyor
