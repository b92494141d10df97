// Tensor metadata, views and copies: the geometry every kernel relies on.
#include <catch2/catch.hpp>

#include "genesis/ops/ops.hpp"
#include "genesis/core/build_info.hpp"
#include "genesis/tensor/op_table.hpp"
#include "genesis/tensor/random.hpp"

using namespace genesis;

TEST_CASE("views share storage and copy through strides", "[tensor]") {
  Tensor a = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  REQUIRE(a.is_contiguous());
  Tensor t = a.transpose(0, 1);
  REQUIRE(t.shape() == Shape{3, 2});
  REQUIRE_FALSE(t.is_contiguous());
  REQUIRE(t.to_vector() == std::vector<float>{1, 4, 2, 5, 3, 6});
  Tensor s = a.slice(1, 1, 3);
  REQUIRE(s.to_vector() == std::vector<float>{2, 3, 5, 6});
  Tensor e = Tensor::from_vector<float>({7, 8, 9}, {3}).expand({2, 3});
  REQUIRE(e.to_vector() == std::vector<float>{7, 8, 9, 7, 8, 9});
  a.slice(1, 0, 1).fill_(0);
  REQUIRE(a.to_vector() == std::vector<float>{0, 2, 3, 0, 5, 6});
  REQUIRE(t.reshape({6}).to_vector() == std::vector<float>{0, 0, 2, 5, 3, 6});
}

TEST_CASE("dtype conversions round-trip", "[tensor]") {
  Tensor a = Tensor::from_vector<float>({1.5f, -2.25f, 3.0f}, {3});
  REQUIRE(a.to(DType::bf16).to(DType::f32).to_vector() == a.to_vector());
  REQUIRE(a.to(DType::f16).to(DType::f32).to_vector() == a.to_vector());
  REQUIRE(a.to(DType::i64).to_vector() == std::vector<float>{1, -2, 3});
}

TEST_CASE("cuda tensors are refused clearly where they cannot exist", "[tensor]") {
  // Without the toolkit the hint is to rebuild; with it on a machine without a GPU the error
  // says no device is visible. (With a GPU they work: tests/dist/test_process_group_nccl.cpp.)
  if (build_info().cuda && cuda_device_count() > 0) {
    REQUIRE(Tensor::zeros({2}, DType::f32, Device::cuda(0)).device() == Device::cuda(0));
    return;
  }
  const char* expected = build_info().cuda ? "no CUDA device is visible" : "built without CUDA";
  REQUIRE_THROWS_WITH(Tensor::zeros({2}, DType::f32, Device::cuda(0)), Catch::Contains(expected));
}
