// The op table is complete: every row has a CPU kernel and a distinct name, and where CUDA
// tensors cannot exist (no CUDA in the build, or no GPU) they are refused instead of crashing.
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

TEST_CASE("CUDA tensors exist on a GPU and are refused clearly elsewhere", "[tensor][op_table]") {
  if (cuda_device_count() > 0) {
    REQUIRE(Tensor::zeros({2}, DType::f32, Device::cuda(0)).to_vector() ==
            std::vector<float>{0.0f, 0.0f});
    return;
  }
  // A build without CUDA says how to get it; a CUDA build without a GPU says none is visible.
  REQUIRE_THROWS_AS(Tensor::empty({2}, DType::f32, Device::cuda(0)), NotSupported);
}
