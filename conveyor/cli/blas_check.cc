#include "conveyor/cli/blas_check.h"

#include <dlfcn.h>

#include <filesystem>
#include <iostream>

namespace conveyor::cli {

std::string LoadedBlas() {
  void* gemm = dlsym(RTLD_DEFAULT, "dgemm_");
  Dl_info info;
  if (gemm == nullptr || dladdr(gemm, &info) == 0 || info.dli_fname == nullptr) return "";
  std::error_code error;
  const std::filesystem::path real = std::filesystem::canonical(info.dli_fname, error);
  return error ? std::string(info.dli_fname) : real.string();
}

bool IsReferenceBlas(const std::string& path) {
  const std::filesystem::path file(path);
  return file.filename().string().starts_with("libblas.so") &&
         file.parent_path().filename() == "blas";
}

void WarnOnReferenceBlas() {
  const std::string blas = LoadedBlas();
  if (IsReferenceBlas(blas)) {
    std::cerr << "conveyor: warning: libtorch runs on the reference BLAS (" << blas
              << "), about 12x slower; install an optimised one: apt-get install "
                 "libopenblas0-openmp (scripts/install-deps does)\n";
  }
}

}  // namespace conveyor::cli
