// Views and joins carry gradients back through their geometry: finite-difference checks for
// reshape, transpose, permute, slice (with a step), select, expand, unsqueeze/squeeze, flatten,
// cat, split, clone and dtype round trips; plus view-versus-copy behaviour and shape errors.
#include <catch2/catch.hpp>

#include "genesis/core/error.hpp"
#include "genesis/ops/ops.hpp"
#include "support/gradcheck.hpp"

using namespace genesis;
using testing::check_gradients;
using testing::leaf;
using Inputs = std::vector<Tensor>;

TEST_CASE("gradients flow through views", "[tensor][shape]") {
  check_gradients([](const Inputs& in) { return in[0].reshape({3, 4}); }, {leaf({2, 6}, 1)});
  check_gradients([](const Inputs& in) { return in[0].transpose(0, 2); }, {leaf({2, 3, 4}, 2)});
  check_gradients([](const Inputs& in) { return in[0].permute({2, 0, 1}); }, {leaf({2, 3, 4}, 3)});
  check_gradients([](const Inputs& in) { return in[0].slice(1, 1, 6, 2); }, {leaf({3, 7}, 4)});
  check_gradients([](const Inputs& in) { return in[0].select(0, -1); }, {leaf({3, 4}, 5)});
  check_gradients([](const Inputs& in) { return in[0].expand({4, 3, 5}); }, {leaf({3, 1}, 6)});
  check_gradients([](const Inputs& in) { return in[0].unsqueeze(1).squeeze(1); }, {leaf({3, 4}, 7)});
  check_gradients([](const Inputs& in) { return in[0].flatten(1); }, {leaf({2, 3, 4}, 8)});
  // A reshape of a transposed tensor must copy, and still route gradients correctly.
  check_gradients([](const Inputs& in) { return in[0].transpose(0, 1).reshape({12}); },
                  {leaf({3, 4}, 9)});
}

TEST_CASE("gradients flow through joins, copies and casts", "[tensor][shape]") {
  check_gradients([](const Inputs& in) { return cat({in[0], in[1]}, 1); },
                  {leaf({2, 3}, 10), leaf({2, 2}, 11)});
  check_gradients(
      [](const Inputs& in) {
        auto parts = split(in[0], 2, 1);
        return mul(parts[0], parts[2].expand({3, 2}));  // the middle part is unused: zero grad
      },
      {leaf({3, 5}, 12)});
  check_gradients([](const Inputs& in) { return in[0].clone(); }, {leaf({4}, 13)});
  check_gradients([](const Inputs& in) { return in[0].to(DType::f16).to(DType::f32); },
                  {leaf({4}, 14, 0.25)}, 1e-2, 5e-3, 5e-2);
}

TEST_CASE("views share storage, reshape copies only when it must", "[tensor][shape]") {
  Tensor a = Tensor::zeros({2, 3});
  Tensor v = a.view({3, 2});
  v.fill_(1.0);
  REQUIRE(a.to_vector() == std::vector<float>(6, 1.0f));
  Tensor t = a.transpose(0, 1);
  REQUIRE_THROWS_WITH(t.view({6}), Catch::Contains("cannot be viewed as [6] (use reshape)"));
  Tensor r = t.reshape({6});
  REQUIRE(r.storage() != a.storage());
  REQUIRE(a.reshape({6}).storage() == a.storage());
}

TEST_CASE("shape errors name the shapes", "[tensor][shape]") {
  Tensor a = Tensor::zeros({2, 3});
  REQUIRE_THROWS_WITH(a.reshape({4, 2}), Catch::Contains("cannot reshape [2, 3] into [4, 2]"));
  REQUIRE_THROWS_WITH(a.expand({2, 4}), Catch::Contains("cannot expand [2, 3] to [2, 4]"));
  REQUIRE_THROWS_WITH(cat({a, Tensor::zeros({3, 3})}, 1), Catch::Contains("[2, 3] and [3, 3]"));
  REQUIRE_THROWS_WITH(a.transpose(0, 2), Catch::Contains("dim 2 out of range for a 2-d tensor"));
}
