// The op table is complete: every row has a CPU kernel and a distinct name, and in a build
// without the CUDA backend a CUDA tensor is refused with the rebuild hint instead of crashing.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "genesis/core/error.hpp"
#include "genesis/tensor/op_table.hpp"

using namespace genesis;

TEST_CASE("every op-table row has a CPU kernel", "[tensor][op_table]") {
  std::set<std::string> names;
  for (int i = 0; i < kOpCount; ++i) {
    const OpInfo& info = kOpInfo[i];
    INFO("op " << info.name);
    REQUIRE(cpu_kernels()[i] != nullptr);
    REQUIRE(names.insert(std::string(info.name)).second);
    REQUIRE_FALSE(info.contract.empty());
  }
  REQUIRE(op_info(OpId::matmul).name == "matmul");
}

TEST_CASE("ops on a device without kernels fail clearly", "[tensor][op_table]") {
  if (cuda_kernels() != nullptr) return;  // a CUDA build checks its kernels in the CUDA op test
  REQUIRE_THROWS_AS(Tensor::empty({2}, DType::f32, Device::cuda(0)), NotSupported);
}
