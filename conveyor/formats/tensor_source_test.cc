#include "conveyor/formats/tensor_source.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

// Finite floating values and any integer pass; NaN or infinity is refused, counted among the
// values read and named with where they are.
TEST(TensorSourceTest, CheckFiniteRefusesNaNOrInfinityNamingTheTensor) {
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf, at::kInt}) {
    const at::Tensor values = at::arange(6, at::kFloat).to(dtype);
    CheckFinite(values.data_ptr(), values.numel(), dtype, "f: ", "t");
  }
  for (const float bad :
       {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
    for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
      at::Tensor values = at::arange(6, at::kFloat);
      values[4] = bad;
      values = values.to(dtype);
      try {
        CheckFinite(values.data_ptr(), values.numel(), dtype, "model folder d: f: ", "w");
        ADD_FAILURE() << "passed " << bad;
      } catch (const UserError& e) {
        EXPECT_NE(
            std::string(e.what()).find(
                "model folder d: f: tensor 'w' holds NaN or infinite values (1 of the 6 read)"),
            std::string::npos)
            << e.what();
      }
    }
  }
}

}  // namespace
}  // namespace conveyor
