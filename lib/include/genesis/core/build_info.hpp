// What the library was built from and with; `genesis --version` prints it.
#pragma once

#include <string>

namespace genesis {

struct BuildInfo {
  std::string version;
  std::string git_hash;
  std::string build_type;
  bool cuda;         // CUDA backend, cuBLAS and the NCCL process group compiled in
  std::string blas;  // CPU matmul library
  std::string gloo;  // the Gloo library behind the CPU process group
};

const BuildInfo& build_info();

}  // namespace genesis
