#include "conveyor/cli/blas_check.h"

#include <gtest/gtest.h>

namespace conveyor::cli {
namespace {

TEST(BlasCheckTest, TellsTheReferenceBlasFromOptimisedOnes) {
  EXPECT_TRUE(IsReferenceBlas("/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0"));
  EXPECT_TRUE(IsReferenceBlas("/usr/lib/aarch64-linux-gnu/blas/libblas.so.3"));
  EXPECT_FALSE(IsReferenceBlas("/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3"));
  EXPECT_FALSE(IsReferenceBlas("/usr/lib/x86_64-linux-gnu/openblas-serial/libopenblas.so.0"));
  EXPECT_FALSE(IsReferenceBlas("/opt/blas/libmkl_rt.so"));
  EXPECT_FALSE(IsReferenceBlas(""));
}

// This test binary links libtorch, which needs a BLAS: the one found is a real file.
TEST(BlasCheckTest, FindsTheBlasThisProcessCalls) {
  const std::string blas = LoadedBlas();
  ASSERT_NE(blas, "");
  EXPECT_NE(blas.find("blas"), std::string::npos) << blas;
}

}  // namespace
}  // namespace conveyor::cli
