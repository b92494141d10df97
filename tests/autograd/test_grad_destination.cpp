// Gradient destinations (autograd/grad_destination.hpp): linear's backward computes a leaf's
// gradient straight into the buffer a reducer offered, with the values a fresh gradient has; a
// second gradient of the leaf adds into it, an existing .grad is never overwritten, and an offer
// withdrawn or of the wrong shape is not used.
#include <catch2/catch.hpp>

#include "genesis/autograd/grad_destination.hpp"
#include "genesis/core/error.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/tensor/random.hpp"

using namespace genesis;

namespace {

struct Layer {
  Tensor w, b;
};

Layer make_layer() {
  Generator gen(3);
  return {Tensor::randn({2, 3}, gen).set_requires_grad(true),
          Tensor::randn({2}, gen).set_requires_grad(true)};
}

Tensor input(std::uint64_t seed) {
  Generator gen(seed);
  return Tensor::randn({4, 3}, gen);
}

// A flat buffer holding garbage, as a bucket does after the last step; w's slot then b's.
struct Bucket {
  Tensor flat = Tensor::full({8}, 99.0);
  Tensor w = flat.slice(0, 0, 6).view({2, 3});
  Tensor b = flat.slice(0, 6, 8);
};

void require_near(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == Approx(want[i]).epsilon(1e-6));
}

}  // namespace

TEST_CASE("linear computes its weight and bias gradients in the offered destination",
          "[autograd]") {
  Layer fresh = make_layer();
  sum(linear(input(1), fresh.w, fresh.b)).backward();

  Layer layer = make_layer();
  Bucket bucket;
  autograd::offer_grad_destination(layer.w, bucket.w);
  autograd::offer_grad_destination(layer.b, bucket.b);
  sum(linear(input(1), layer.w, layer.b)).backward();
  REQUIRE(layer.w.grad().storage() == bucket.flat.storage());
  REQUIRE(layer.b.grad().storage() == bucket.flat.storage());
  REQUIRE(bucket.w.to_vector() == fresh.w.grad().to_vector());
  REQUIRE(bucket.b.to_vector() == fresh.b.grad().to_vector());
}

TEST_CASE("a tied weight takes its destination once and adds its second gradient into it",
          "[autograd]") {
  Layer fresh = make_layer();
  (sum(linear(input(1), fresh.w)) + sum(linear(input(2), fresh.w))).backward();

  Layer layer = make_layer();
  Bucket bucket;
  autograd::offer_grad_destination(layer.w, bucket.w);
  (sum(linear(input(1), layer.w)) + sum(linear(input(2), layer.w))).backward();
  REQUIRE(layer.w.grad().storage() == bucket.flat.storage());
  require_near(bucket.w.to_vector(), fresh.w.grad().to_vector());
}

TEST_CASE("a leaf that has a .grad adds into it and leaves the destination alone", "[autograd]") {
  Layer fresh = make_layer();
  sum(linear(input(1), fresh.w)).backward();
  sum(linear(input(2), fresh.w)).backward();

  Layer layer = make_layer();
  sum(linear(input(1), layer.w)).backward();  // an earlier micro-batch, under no_sync
  Bucket bucket;
  autograd::offer_grad_destination(layer.w, bucket.w);
  sum(linear(input(2), layer.w)).backward();
  REQUIRE(layer.w.grad().storage() != bucket.flat.storage());
  require_near(layer.w.grad().to_vector(), fresh.w.grad().to_vector());
  REQUIRE(bucket.flat.to_vector() == std::vector<float>(8, 99.0f));
}

TEST_CASE("a withdrawn offer is not used, and an offer must fit the leaf", "[autograd]") {
  Layer layer = make_layer();
  Bucket bucket;
  autograd::offer_grad_destination(layer.w, bucket.w);
  autograd::withdraw_grad_destination(layer.w);
  sum(linear(input(1), layer.w)).backward();
  REQUIRE(layer.w.grad().storage() != bucket.flat.storage());
  REQUIRE(bucket.flat.to_vector() == std::vector<float>(8, 99.0f));

  REQUIRE_THROWS_AS(autograd::offer_grad_destination(layer.w, bucket.flat.slice(0, 0, 6)),
                    InvalidArgument);
  REQUIRE_THROWS_AS(autograd::offer_grad_destination(layer.b, bucket.w), InvalidArgument);
}

TEST_CASE("an embedding computes its table's gradient in the offered destination", "[autograd]") {
  const Tensor index = Tensor::from_vector<std::int64_t>({0, 1, 1}, {3});
  Layer fresh = make_layer();
  sum(embedding(fresh.w, index)).backward();

  Layer layer = make_layer();
  Bucket bucket;
  autograd::offer_grad_destination(layer.w, bucket.w);
  sum(embedding(layer.w, index)).backward();
  REQUIRE(layer.w.grad().storage() == bucket.flat.storage());
  REQUIRE(bucket.w.to_vector() == fresh.w.grad().to_vector());
}

TEST_CASE("a tied table takes its destination with its first gradient and adds the second",
          "[autograd]") {
  // A tied table's two gradients, in either order: whichever op comes first computes its gradient
  // in the destination (the embedding its whole table, the linear its product), and the other
  // adds into it.
  const Tensor index = Tensor::from_vector<std::int64_t>({0, 1, 1}, {3});
  const auto tied = [&](const Tensor& w, bool embedding_first) {
    // The engine runs the nodes recorded last first.
    if (embedding_first) {
      const Tensor head = sum(linear(input(1), w));
      return head + sum(embedding(w, index));
    }
    const Tensor rows = sum(embedding(w, index));
    return rows + sum(linear(input(1), w));
  };
  for (bool embedding_first : {false, true}) {
    Layer fresh = make_layer();
    tied(fresh.w, embedding_first).backward();

    Layer layer = make_layer();
    Tensor zeros = Tensor::zeros({2, 3});
    autograd::offer_grad_destination(layer.w, zeros);
    tied(layer.w, embedding_first).backward();
    REQUIRE(layer.w.grad().is_same(zeros));
    require_near(zeros.to_vector(), fresh.w.grad().to_vector());
  }
}
