#include "conveyor/cli/blas_check.h"

#include <dlfcn.h>

#include <filesystem>
#include <iostream>

namespace conveyor {

std::string LoadedBlas(const char* symbol) {
  void* address = dlsym(RTLD_DEFAULT, symbol);
  Dl_info info;
  if (address == nullptr || dladdr(address, &info) == 0 || info.dli_fname == nullptr) return "";
  std::error_code error;
  const std::filesystem::path real = std::filesystem::canonical(info.dli_fname, error);
  return error ? std::string(info.dli_fname) : real.string();
}

std::string BlasWarning(const std::string& path) {
  const std::filesystem::path file(path);
  const std::string dir = file.parent_path().filename().string();
  const std::string fix =
      "apt-get install libopenblas0-openmp, and if another BLAS stays selected: "
      "update-alternatives --config libblas.so.3-" +
      (dir.empty() ? std::string("<arch>") : file.parent_path().parent_path().filename().string());
  if (file.filename().string().starts_with("libblas.so") && dir == "blas") {
    return "libtorch runs on the reference BLAS (" + path + "), about 12x slower than OpenBLAS; " +
           fix;
  }
  if (dir == "openblas-pthread") {
    return "libtorch runs on OpenBLAS's pthread build (" + path +
           "), whose threads compete with libtorch's: about 1.6x slower than the OpenMP build; " +
           fix;
  }
  return "";
}

void WarnAboutBlas() {
  // The product libtorch calls (the reference BLAS wins when it is loaded first), then the
  // OpenBLAS core that Debian's OpenBLAS libblas.so.3 may take its kernels from (whichever
  // libopenblas.so.0 the alternatives select).
  std::string warning = BlasWarning(LoadedBlas("dgemm_"));
  if (warning.empty()) warning = BlasWarning(LoadedBlas("openblas_get_config"));
  if (!warning.empty()) std::cerr << "conveyor: warning: " << warning << "\n";
}

}  // namespace conveyor
