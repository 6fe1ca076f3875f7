// Which BLAS libtorch runs on. Debian's libtorch calls whatever libblas.so.3 the system's
// alternatives point at; with only Debian's reference BLAS (libblas3) installed, training is
// about 12x slower than on OpenBLAS, and OpenBLAS's pthread build (whose own threads compete
// with libtorch's OpenMP threads) about 1.6x slower than its OpenMP build
// (docs/BENCHMARKS.md). conveyor warns once at start-up in those cases.
#ifndef CONVEYOR_CLI_BLAS_CHECK_H_
#define CONVEYOR_CLI_BLAS_CHECK_H_

#include <string>

namespace conveyor {

// The file (symbolic links resolved) that defines `symbol` in this process ("dgemm_": the
// matrix product libtorch calls; "openblas_get_config": OpenBLAS's core), "" when none does.
std::string LoadedBlas(const char* symbol);

// The warning for the BLAS at `path` (from LoadedBlas), or "" when it is a good choice.
// Debian's reference BLAS is a libblas.so* in a directory named "blas"
// (/usr/lib/<arch>/blas/libblas.so.3.11.0); OpenBLAS's pthread build lives in
// "openblas-pthread".
std::string BlasWarning(const std::string& path);

// The warning for OpenBLAS running the kernels of `core` (openblas_get_corename) on a CPU
// with AVX2 (`avx2`) or with AVX-512 F/BW/DQ/VL (`avx512`), or "" when they suit it. An
// OpenBLAS older than the CPU model falls back to generic kernels: Debian 12's 0.3.21 runs
// "Prescott" (SSE3) on Xeons of model 207, 4x slower at a 512 x 512 product than with
// OPENBLAS_CORETYPE=SkylakeX (docs/BENCHMARKS.md).
std::string OpenBlasCoreWarning(const std::string& core, bool avx2, bool avx512);

// Prints the warning for the loaded BLAS (dgemm_'s library, then OpenBLAS's core, then the
// kernels OpenBLAS chose for this CPU) to stderr, if any, as one line. Never throws.
void WarnAboutBlas();

}  // namespace conveyor

#endif  // CONVEYOR_CLI_BLAS_CHECK_H_
