// Which BLAS libtorch runs on. Debian's libtorch calls whatever libblas.so.3 the system's
// alternatives point at; with only Debian's reference BLAS (libblas3) installed, training is
// about 12x slower than on OpenBLAS. conveyor warns once at start-up in that case.
#ifndef CONVEYOR_CLI_BLAS_CHECK_H_
#define CONVEYOR_CLI_BLAS_CHECK_H_

#include <string>

namespace conveyor::cli {

// The file (symbolic links resolved) that defines the BLAS matrix product `dgemm_` this
// process calls, or "" when none is loaded.
std::string LoadedBlas();

// True when `path` is Debian's reference BLAS: a libblas.so* in a directory named "blas"
// (/usr/lib/<arch>/blas/libblas.so.3.11.0).
bool IsReferenceBlas(const std::string& path);

// When this process runs on the reference BLAS, prints one line to stderr naming the
// library and the package to install. Never throws.
void WarnOnReferenceBlas();

}  // namespace conveyor::cli

#endif  // CONVEYOR_CLI_BLAS_CHECK_H_
