#include "conveyor/cli/blas_check.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace conveyor {
namespace {

TEST(BlasCheckTest, WarnsAboutTheReferenceAndThePthreadBuild) {
  const std::string reference = BlasWarning("/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0");
  EXPECT_NE(reference.find("reference BLAS"), std::string::npos) << reference;
  EXPECT_NE(reference.find("update-alternatives --config libblas.so.3-x86_64-linux-gnu"),
            std::string::npos)
      << reference;
  const std::string pthread =
      BlasWarning("/usr/lib/aarch64-linux-gnu/openblas-pthread/libopenblasp-r0.3.21.so");
  EXPECT_NE(pthread.find("pthread build"), std::string::npos) << pthread;
  EXPECT_EQ(BlasWarning("/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3"), "");
  EXPECT_EQ(BlasWarning("/usr/lib/x86_64-linux-gnu/openblas-serial/libopenblas.so.0"), "");
  EXPECT_EQ(BlasWarning("/opt/intel/lib/libmkl_rt.so"), "");
  EXPECT_EQ(BlasWarning(""), "");
}

TEST(BlasCheckTest, WarnsAboutGenericOpenBlasKernelsOnANewerCpu) {
  const std::string avx512 = OpenBlasCoreWarning("Prescott", true, true);
  EXPECT_NE(avx512.find("OPENBLAS_CORETYPE=SkylakeX"), std::string::npos) << avx512;
  EXPECT_NE(avx512.find("Prescott kernels"), std::string::npos) << avx512;
  const std::string avx2 = OpenBlasCoreWarning("Nehalem", true, false);
  EXPECT_NE(avx2.find("OPENBLAS_CORETYPE=Haswell"), std::string::npos) << avx2;
  EXPECT_EQ(OpenBlasCoreWarning("SkylakeX", true, true), "");
  EXPECT_EQ(OpenBlasCoreWarning("Haswell", true, false), "");
  EXPECT_EQ(OpenBlasCoreWarning("Prescott", false, false), "");  // an old CPU: they suit it
}

// This test binary links libtorch, which needs a BLAS: the one found is a real file, a BLAS
// library (Debian's libtorch calls libblas.so.3) or libtorch itself (pip's wheels link MKL in).
TEST(BlasCheckTest, FindsTheBlasThisProcessCalls) {
  const std::string blas = LoadedBlas("dgemm_");
  ASSERT_NE(blas, "");
  EXPECT_TRUE(std::filesystem::is_regular_file(blas)) << blas;
  const std::string file = std::filesystem::path(blas).filename().string();
  EXPECT_TRUE(file.find("blas") != std::string::npos || file.find("libtorch_cpu") == 0) << blas;
}

}  // namespace
}  // namespace conveyor
