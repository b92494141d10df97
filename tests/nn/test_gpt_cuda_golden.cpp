// Golden test on the GPU: a GPT-2 124M-shaped model (12 layers, 768 wide, 12 heads, block 1024,
// vocab 50304) with the weights PyTorch drew, loaded from safetensors, gives PyTorch's loss and
// gradients on the same tokens: in fp32 to f32 rounding of long sums, and under bf16 autocast
// within bf16 tolerance. tests/golden/make_gpt2_reference.py computes the reference on the same
// GPU. Tagged [cuda]: without a GPU, or without PyTorch beside it, the test says so and returns.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>

#include "genesis/autograd/autocast.hpp"
#include "genesis/ckpt/safetensors.hpp"
#include "genesis/nn/gpt.hpp"
#include "genesis/ops/ops.hpp"
#include "support/cli_run.hpp"
#include "support/gpu_required.hpp"

using namespace genesis;

namespace {

std::map<std::string, Tensor> load(const std::filesystem::path& path) {
  std::map<std::string, Tensor> out;
  for (auto& [name, t] : ckpt::load_safetensors(path).tensors) out.emplace(name, t);
  return out;
}

// ||a - b|| / ||b|| over all elements, in double.
double relative_error(const Tensor& got, const Tensor& want) {
  const std::vector<float> a = got.to_vector(), b = want.to_vector();
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    norm += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

// Loss and gradients of `model` on the batch, compared with the reference file's.
void check_against(nn::GPT& model, const Tensor& idx, const Tensor& targets,
                   const std::map<std::string, Tensor>& ref, std::optional<DType> autocast,
                   double loss_tol, double grad_tol) {
  for (auto& [name, p] : model.named_parameters()) p.set_grad(Tensor());
  Tensor logits;
  {
    amp::AutocastGuard guard(autocast);
    logits = model.forward(idx);
  }
  Tensor loss = cross_entropy(logits.to(DType::f32).reshape({-1, logits.size(-1)}),
                              targets.reshape({-1}));
  loss.backward();
  const double want = ref.at("loss").item<double>();
  INFO("loss: genesis " << loss.item<double>() << ", pytorch " << want);
  CHECK(std::abs(loss.item<double>() - want) <= loss_tol * std::abs(want));
  for (auto& [name, p] : model.named_parameters()) {
    const double err = relative_error(p.grad(), ref.at(name));
    INFO("gradient of " << name << ": relative error " << err);
    CHECK(err <= grad_tol);
  }
}

}  // namespace

TEST_CASE("a GPT-2 124M-shaped model matches PyTorch on the GPU", "[cuda][nn][golden]") {
  if (testing::skip_without_gpu("the GPT-2 golden test")) return;
  testing::TempDir dir;
  const testing::CliResult made = testing::run_process(
      {"python3", std::string(GENESIS_TEST_SOURCE_DIR) + "/tests/golden/make_gpt2_reference.py",
       "--out", dir.path().string()});
  if (made.exit_code == 3 &&
      testing::skip_or_fail("the GPT-2 golden test", "PyTorch with CUDA is not available: " + made.err))
    return;
  INFO(made.err);
  REQUIRE(made.exit_code == 0);

  const nn::GPTConfig config{12, 12, 768, 1024, 50304, 0.0};
  Generator gen(0);
  nn::GPT model(config, gen);
  model.load_state_dict(load(dir.path() / "weights.safetensors"));
  model.to(Device::cuda(0));
  const auto batch = load(dir.path() / "batch.safetensors");
  const Tensor idx = batch.at("idx").to(Device::cuda(0));
  const Tensor targets = batch.at("targets").to(Device::cuda(0));

  SECTION("fp32") {
    // Both sides sum in f32 in different orders over K up to 3072 and 50304 logits.
    check_against(model, idx, targets, load(dir.path() / "ref_fp32.safetensors"), std::nullopt,
                  1e-5, 1e-3);
  }
  SECTION("bf16 autocast") {
    check_against(model, idx, targets, load(dir.path() / "ref_bf16.safetensors"), DType::bf16,
                  1e-2, 5e-2);
  }
}
