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

std::string OpenBlasCoreWarning(const std::string& core, bool avx2, bool avx512) {
  static const char* const kGeneric[] = {"Prescott",   "Core2",     "Penryn",      "Dunnington",
                                         "Nehalem",    "Atom",      "Sandybridge", "Katmai",
                                         "Coppermine", "Northwood", "Banias"};
  if (!avx2) return "";
  bool generic = false;
  for (const char* name : kGeneric) generic = generic || core == name;
  if (!generic) return "";
  const char* choice = avx512 ? "SkylakeX" : "Haswell";
  return std::string("OpenBLAS runs its ") + core + " kernels on this CPU, which has " +
         (avx512 ? "AVX-512" : "AVX2") +
         " (its build does not know the CPU's model): matrix products about 4x slower; set "
         "OPENBLAS_CORETYPE=" +
         choice + " before starting conveyor";
}

void WarnAboutBlas() {
  // The product libtorch calls (the reference BLAS wins when it is loaded first), then the
  // OpenBLAS core that Debian's OpenBLAS libblas.so.3 may take its kernels from (whichever
  // libopenblas.so.0 the alternatives select).
  std::string warning = BlasWarning(LoadedBlas("dgemm_"));
  if (warning.empty()) warning = BlasWarning(LoadedBlas("openblas_get_config"));
#if defined(__x86_64__)
  using CoreName = char* (*)();
  if (const auto core_name =
          reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
      warning.empty() && core_name != nullptr) {
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    warning = OpenBlasCoreWarning(core_name(), __builtin_cpu_supports("avx2"), avx512);
  }
#endif
  if (!warning.empty()) std::cerr << "conveyor: warning: " << warning << "\n";
}

}  // namespace conveyor
