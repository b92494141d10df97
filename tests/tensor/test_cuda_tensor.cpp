// CUDA tensors beyond single kernels, on a GPU only ([cuda]; skipped elsewhere): memory
// statistics as torch.cuda reports them, copies across the host boundary in every layout and
// dtype, a bad token id surfacing as a clear error at the next sync instead of a crash, and
// autograd through a small network (and a tied embedding) giving the CPU's gradients.
// Everywhere: pinned host memory uploads what it holds, or is refused clearly where there is no
// GPU.
#include <catch2/catch.hpp>

#include <cmath>

#include "genesis/core/error.hpp"
#include "genesis/nn/layers.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/tensor/cuda_memory.hpp"
#include "genesis/tensor/random.hpp"
#include "support/gpu_required.hpp"

using namespace genesis;

namespace {

bool skip_without_gpu() { return testing::skip_without_gpu("this CUDA tensor test"); }

const Device kGpu = Device::cuda(0);

}  // namespace

TEST_CASE("memory_allocated follows live tensors and the cache keeps freed blocks",
          "[cuda][tensor]") {
  if (skip_without_gpu()) return;
  cuda::empty_cache();
  const std::int64_t before = cuda::memory_allocated();
  std::int64_t reserved = 0;
  {
    Tensor t = Tensor::empty({1 << 20}, DType::f32, kGpu);  // 4 MiB
    CHECK(cuda::memory_allocated() == before + (4 << 20));
    reserved = cuda::memory_reserved();
    CHECK(reserved >= cuda::memory_allocated());
    CHECK(cuda::max_memory_allocated() >= before + (4 << 20));
  }
  CHECK(cuda::memory_allocated() == before);
  CHECK(cuda::memory_reserved() == reserved);  // cached, not returned
  const auto hits = cuda::memory_stats().cache_hits;
  Tensor again = Tensor::empty({1 << 20}, DType::f32, kGpu);
  CHECK(cuda::memory_stats().cache_hits == hits + 1);
  again = Tensor();
  cuda::empty_cache();
  CHECK(cuda::memory_reserved() < reserved);
}

TEST_CASE("pinned host memory uploads its values, or is refused without a GPU", "[tensor]") {
  Generator gen(5);
  Tensor host = Tensor::randn({3, 1000}, gen);
  if (cuda_device_count() == 0) {
    REQUIRE_THROWS_AS(host.pin_memory(), NotSupported);
    return;
  }
  Tensor pinned = host.transpose(0, 1).pin_memory();
  CHECK(pinned.is_pinned());
  CHECK_FALSE(host.is_pinned());
  CHECK(pinned.is_contiguous());
  Tensor on_gpu = pinned.to(kGpu);  // asynchronous from pinned memory
  pinned = Tensor();                // its block must outlive the copy all the same
  Tensor reuse = Tensor::zeros({1000, 3}).pin_memory();
  CHECK(on_gpu.to_vector() == host.transpose(0, 1).contiguous().to_vector());
}

TEST_CASE("copies between host and device keep values in every layout and dtype",
          "[cuda][tensor]") {
  if (skip_without_gpu()) return;
  Generator gen(3);
  Tensor host = Tensor::randn({7, 13}, gen);
  // Transposed source, converting dtype on the way up, then down into a strided host view.
  Tensor up = host.transpose(0, 1).to(kGpu).to(DType::bf16);
  CHECK(up.device() == kGpu);
  Tensor back = Tensor::zeros({13, 14});
  back.slice(1, 0, 7).copy_(up);
  const std::vector<float> want = host.transpose(0, 1).to(DType::bf16).to(DType::f32).to_vector();
  CHECK(back.slice(1, 0, 7).to_vector() == want);
  // A broadcast source expanded on the device, and integers.
  Tensor row = Tensor::from_vector(std::vector<std::int64_t>{1, -2, 3}, {1, 3}, kGpu);
  Tensor wide = Tensor::empty({4, 3}, DType::i64, kGpu);
  wide.copy_(row);
  CHECK(wide.to(Device::cpu()).to_vector() ==
        std::vector<float>{1, -2, 3, 1, -2, 3, 1, -2, 3, 1, -2, 3});
  CHECK(Tensor::full({5}, 2.5, DType::f16, kGpu).to_vector() == std::vector<float>(5, 2.5f));
}

TEST_CASE("a bad token id on the GPU is an InvalidArgument at the next sync", "[cuda][tensor]") {
  if (skip_without_gpu()) return;
  Generator gen(1);
  Tensor weight = Tensor::randn({10, 4}, gen).to(kGpu);
  Tensor idx = Tensor::from_vector(std::vector<std::int64_t>{1, 12, 3}, {3}, kGpu);
  try {
    embedding(weight, idx).to_vector();
    FAIL("no error for index 12 of 10 rows");
  } catch (const InvalidArgument& e) {
    const std::string message = e.what();
    CHECK(message.find("embedding") != std::string::npos);
    CHECK(message.find("index 12 at position 1 is outside [0, 10)") != std::string::npos);
  }
  // The device is still usable afterwards.
  CHECK(embedding(weight, Tensor::from_vector(std::vector<std::int64_t>{2}, {1}, kGpu))
            .to_vector() == weight.slice(0, 2, 3).to_vector());
}

TEST_CASE("autograd through an MLP on the GPU gives the CPU's gradients", "[cuda][tensor]") {
  if (skip_without_gpu()) return;
  Generator gen(7);
  nn::Linear cpu1(32, 64, gen), cpu2(64, 5, gen);
  Generator same(7);
  nn::Linear gpu1(32, 64, same), gpu2(64, 5, same);
  gpu1.to(kGpu);
  gpu2.to(kGpu);
  Tensor x = Tensor::randn({16, 32}, gen);
  Tensor y = Tensor::from_vector(std::vector<std::int64_t>{0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1,
                                                           2, 3, 4, 0},
                                 {16});
  Tensor cpu_loss = cross_entropy(cpu2(gelu(cpu1(x))), y);
  Tensor gpu_loss = cross_entropy(gpu2(gelu(gpu1(x.to(kGpu)))), y.to(kGpu));
  cpu_loss.backward();
  gpu_loss.backward();
  CHECK(gpu_loss.item<double>() == Approx(cpu_loss.item<double>()).epsilon(1e-5));
  auto cpu_params = cpu1.parameters(), gpu_params = gpu1.parameters();
  for (auto& p : cpu2.parameters()) cpu_params.push_back(p);
  for (auto& p : gpu2.parameters()) gpu_params.push_back(p);
  for (std::size_t i = 0; i < cpu_params.size(); ++i) {
    const std::vector<float> want = cpu_params[i].grad().to_vector();
    const std::vector<float> got = gpu_params[i].grad().to_vector();
    REQUIRE(got.size() == want.size());
    for (std::size_t k = 0; k < want.size(); ++k) {
      INFO("parameter " << i << " element " << k);
      CHECK(std::abs(got[k] - want[k]) <= 1e-5 + 1e-4 * std::abs(want[k]));
    }
  }
}

TEST_CASE("a tied embedding's gradient on the GPU is the CPU's", "[cuda][tensor]") {
  // The lookup adds its rows into the .grad the head's gradient became (embedding_backward with
  // i[0] = 1), on the device as on the host.
  if (skip_without_gpu()) return;
  Generator gen(11);
  const Tensor values = Tensor::randn({9, 6}, gen);
  const Tensor index = Tensor::from_vector<std::int64_t>({4, 0, 4, 2, 8, 4}, {2, 3});
  auto grad_of = [&](Device device) {
    Tensor table = values.to(device).detach().set_requires_grad(true);
    sum(linear(embedding(table, index.to(device)), table)).backward();
    return table.grad().to_vector();
  };
  const std::vector<float> want = grad_of(Device::cpu()), got = grad_of(kGpu);
  REQUIRE(got.size() == want.size());
  for (std::size_t k = 0; k < want.size(); ++k) {
    INFO("element " << k);
    CHECK(std::abs(got[k] - want[k]) <= 1e-5 + 1e-4 * std::abs(want[k]));
  }
}
