// SGD, Adam and AdamW against the PyTorch update formulas evaluated in double in this file, plus
// the bookkeeping every optimizer shares: zero_grad, skipping parameters without a gradient,
// option and parameter validation, and the state export/import that checkpoints rely on.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "genesis/core/error.hpp"
#include "genesis/optim/adam.hpp"
#include "genesis/optim/sgd.hpp"
#include "genesis/tensor/random.hpp"

using namespace genesis;
using namespace genesis::optim;
using Vec = std::vector<double>;

namespace {

Tensor param_of(const std::vector<float>& values) {
  return Tensor::from_vector(values, {static_cast<std::int64_t>(values.size())}).set_requires_grad();
}

// The gradient fed at step t (0-based) to every optimizer under test: varied signs and sizes.
std::vector<float> grad_at(int t, std::size_t n) {
  std::vector<float> g(n);
  for (std::size_t i = 0; i < n; ++i)
    g[i] = static_cast<float>((0.3 + 0.2 * t) * (i % 2 ? -1.0 : 1.0) * (1.0 + static_cast<double>(i)));
  return g;
}

void set_grad(Tensor& p, const std::vector<float>& g) {
  p.set_grad(Tensor::from_vector(g, p.shape()));
}

// torch.optim.SGD, written from its documentation's pseudo-code.
Vec reference_sgd(Vec p, int steps, const SGDOptions& o) {
  Vec buf(p.size(), 0.0);
  for (int t = 0; t < steps; ++t) {
    std::vector<float> gf = grad_at(t, p.size());
    for (std::size_t i = 0; i < p.size(); ++i) {
      double g = gf[i] + o.weight_decay * p[i];
      if (o.momentum != 0) {
        buf[i] = t == 0 ? g : o.momentum * buf[i] + (1 - o.dampening) * g;
        g = o.nesterov ? g + o.momentum * buf[i] : buf[i];
      }
      p[i] -= o.lr * g;
    }
  }
  return p;
}

// torch.optim.Adam (decoupled = false) and torch.optim.AdamW (decoupled = true).
Vec reference_adam(const Vec& start, int steps, const AdamOptions& o, bool decoupled) {
  Vec p = start, m(p.size(), 0.0), v(p.size(), 0.0);
  for (int t = 1; t <= steps; ++t) {
    std::vector<float> gf = grad_at(t - 1, p.size());
    for (std::size_t i = 0; i < p.size(); ++i) {
      double g = gf[i];
      if (decoupled) p[i] *= 1 - o.lr * o.weight_decay;
      else g += o.weight_decay * p[i];
      m[i] = o.beta1 * m[i] + (1 - o.beta1) * g;
      v[i] = o.beta2 * v[i] + (1 - o.beta2) * g * g;
      const double m_hat = m[i] / (1 - std::pow(o.beta1, t));
      const double v_hat = v[i] / (1 - std::pow(o.beta2, t));
      p[i] -= o.lr * m_hat / (std::sqrt(v_hat) + o.eps);
    }
  }
  return p;
}

void run_steps(Optimizer& opt, Tensor& p, int steps) {
  for (int t = 0; t < steps; ++t) {
    set_grad(p, grad_at(t, static_cast<std::size_t>(p.numel())));
    opt.step();
  }
}

void require_close(const Tensor& t, const Vec& expected, double rel = 2e-6) {
  std::vector<float> got = t.to_vector();
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    REQUIRE(got[i] == Approx(expected[i]).epsilon(rel).margin(1e-7));
}

const std::vector<float> kStart = {1.0f, -2.0f, 0.5f, 3.0f, -0.25f};
Vec start_vec() { return Vec(kStart.begin(), kStart.end()); }

}  // namespace

TEST_CASE("sgd matches torch.optim.SGD for plain, momentum and nesterov updates", "[optim]") {
  SECTION("one plain step, by hand: 1 - 0.1 * 0.3 = 0.97") {
    Tensor p = param_of({1.0f});
    SGD sgd({p}, {.lr = 0.1});
    run_steps(sgd, p, 1);
    REQUIRE(p.to_vector()[0] == Approx(0.97f));
  }
  for (SGDOptions o : {SGDOptions{.lr = 0.1},
                       SGDOptions{.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01},
                       SGDOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 0.02, .nesterov = true}}) {
    Tensor p = param_of(kStart);
    SGD sgd({p}, o);
    run_steps(sgd, p, 3);
    require_close(p, reference_sgd(start_vec(), 3, o));
    REQUIRE(sgd.step_count() == 3);
  }
}

TEST_CASE("adam and adamw match torch.optim over three steps with weight decay", "[optim]") {
  SECTION("first step, by hand: a step of lr against the gradient's sign") {
    Tensor p = param_of({1.0f, 1.0f});
    Adam adam({p}, {.lr = 0.1});
    p.set_grad(Tensor::from_vector<float>({0.5f, -2.0f}, {2}));
    adam.step();
    require_close(p, {0.9, 1.1});
  }
  const AdamOptions o{.lr = 0.01, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6, .weight_decay = 0.1};
  Tensor pa = param_of(kStart);
  Adam adam({pa}, o);
  run_steps(adam, pa, 3);
  require_close(pa, reference_adam(start_vec(), 3, o, false));

  Tensor pw = param_of(kStart);
  AdamW adamw({pw}, o);
  run_steps(adamw, pw, 3);
  require_close(pw, reference_adam(start_vec(), 3, o, true));
  REQUIRE(pa.to_vector() != pw.to_vector());
}

TEST_CASE("adam and adamw differ exactly by the form of the weight decay", "[optim]") {
  const std::vector<float> g = {0.3f, -1.5f, 0.02f, 2.0f, -0.7f};
  AdamOptions o{.lr = 0.01, .weight_decay = 0.2};
  AdamOptions no_decay = o;
  no_decay.weight_decay = 0.0;
  // Without decay the two rules are one rule.
  Tensor p1 = param_of(kStart), p2 = param_of(kStart);
  Adam a1({p1}, no_decay);
  AdamW a2({p2}, no_decay);
  set_grad(p1, g);
  set_grad(p2, g);
  a1.step();
  a2.step();
  REQUIRE(p1.to_vector() == p2.to_vector());

  // Adam's decay is the gradient g + wd * p fed to an undecayed Adam.
  std::vector<float> g_l2(g.size());
  for (std::size_t i = 0; i < g.size(); ++i) g_l2[i] = g[i] + 0.2f * kStart[i];
  Tensor pl = param_of(kStart), pr = param_of(kStart);
  Adam with_decay({pl}, o), without({pr}, no_decay);
  set_grad(pl, g);
  set_grad(pr, g_l2);
  with_decay.step();
  without.step();
  REQUIRE(pl.to_vector() == pr.to_vector());

  // AdamW's decay is a shrink of the parameter by lr * wd on top of the undecayed update.
  Tensor pw = param_of(kStart);
  AdamW decoupled({pw}, o);
  set_grad(pw, g);
  decoupled.step();
  std::vector<float> w = pw.to_vector(), plain = p1.to_vector();
  for (std::size_t i = 0; i < w.size(); ++i)
    REQUIRE(w[i] == Approx(plain[i] - 0.01 * 0.2 * kStart[i]).epsilon(1e-6));
}

TEST_CASE("adamw's parallel path on a large tensor matches the reference", "[optim]") {
  Generator gen(7);
  const std::int64_t n = 100000;  // above the OpenMP threshold
  Tensor p = Tensor::randn({n}, gen).set_requires_grad();
  Tensor g = Tensor::randn({n}, gen);
  std::vector<float> p0 = p.to_vector(), gv = g.to_vector();
  AdamW opt({p}, {.lr = 0.001, .weight_decay = 0.01});
  p.set_grad(g);
  opt.step();
  std::vector<float> got = p.to_vector();
  for (std::int64_t i = 0; i < n; i += 997) {
    const double pd = p0[i] * (1 - 0.001 * 0.01);
    const double gd = gv[i];
    const double expected = pd - 0.001 * gd / (std::abs(gd) + 1e-8);  // step 1: m_hat/sqrt(v_hat) = sign
    REQUIRE(got[i] == Approx(expected).epsilon(1e-5).margin(1e-7));
  }
}

TEST_CASE("non-contiguous and bf16 parameters are updated through an f32 copy", "[optim]") {
  Tensor base = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor strided = base.transpose(0, 1).detach().set_requires_grad();  // (3, 2) view
  REQUIRE_FALSE(strided.is_contiguous());
  Tensor dense = strided.contiguous().detach().set_requires_grad();
  Tensor half = dense.to(DType::bf16).detach().set_requires_grad();
  Tensor g = Tensor::from_vector<float>({0.5f, -0.5f, 1, -1, 2, -2}, {3, 2});
  for (Tensor* p : {&strided, &dense, &half}) {
    AdamW opt({*p}, {.lr = 0.25});
    p->set_grad(g);
    opt.step();
  }
  const std::vector<float> expected = {0.75f, 4.25f, 1.75f, 5.25f, 2.75f, 6.25f};
  REQUIRE(dense.to_vector() == strided.to_vector());
  const std::vector<float> base_expected = {0.75f, 1.75f, 2.75f, 4.25f, 5.25f, 6.25f};
  std::vector<float> b = base.to_vector();  // the view wrote through to the storage it shares
  for (std::size_t i = 0; i < b.size(); ++i) REQUIRE(b[i] == Approx(base_expected[i]));
  std::vector<float> h = half.to_vector();
  for (std::size_t i = 0; i < h.size(); ++i) REQUIRE(h[i] == Approx(expected[i]).epsilon(1e-2));
  REQUIRE(half.dtype() == DType::bf16);
}

TEST_CASE("zero_grad clears gradients and step skips parameters without one", "[optim]") {
  Tensor a = param_of({1.0f, 2.0f}), b = param_of({3.0f});
  Adam opt({a, b}, {.lr = 0.1});
  a.set_grad(Tensor::from_vector<float>({1.0f, 1.0f}, {2}));
  opt.step();
  REQUIRE(b.to_vector() == std::vector<float>{3.0f});
  REQUIRE(a.to_vector() != std::vector<float>{1.0f, 2.0f});
  NamedTensors state = opt.state_tensors();
  REQUIRE(state.size() == 3);  // 0.step, 0.exp_avg, 0.exp_avg_sq; nothing for b
  for (const auto& [name, t] : state) REQUIRE(name.rfind("0.", 0) == 0);

  opt.zero_grad();
  REQUIRE_FALSE(a.grad().defined());
  REQUIRE_FALSE(b.grad().defined());
  std::vector<float> before = a.to_vector();
  opt.step();  // no gradients at all: nothing moves, the step is still counted
  REQUIRE(a.to_vector() == before);
  REQUIRE(opt.step_count() == 2);

  SGD sgd({a, b}, {.lr = 0.5, .momentum = 0.9});
  b.set_grad(Tensor::from_vector<float>({2.0f}, {1}));
  sgd.step();
  REQUIRE(a.to_vector() == before);
  REQUIRE(b.to_vector() == std::vector<float>{2.0f});
}

TEST_CASE("exported optimizer state resumes the identical trajectory", "[optim]") {
  auto check = [](auto make) {
    Tensor p_full = param_of(kStart);
    auto full = make(p_full);
    run_steps(*full, p_full, 4);

    Tensor p_first = param_of(kStart);
    auto first = make(p_first);
    run_steps(*first, p_first, 2);
    Tensor p_resumed = p_first.detach().clone().set_requires_grad();
    auto resumed = make(p_resumed);
    resumed->load_state_tensors(first->state_tensors());
    resumed->set_step_count(first->step_count());
    for (int t = 2; t < 4; ++t) {
      set_grad(p_resumed, grad_at(t, kStart.size()));
      resumed->step();
    }
    REQUIRE(p_resumed.to_vector() == p_full.to_vector());
    REQUIRE(resumed->step_count() == 4);
  };
  check([](Tensor p) { return std::make_unique<AdamW>(std::vector<Tensor>{p}, AdamOptions{.lr = 0.01, .weight_decay = 0.1}); });
  check([](Tensor p) { return std::make_unique<SGD>(std::vector<Tensor>{p}, SGDOptions{.lr = 0.05, .momentum = 0.9}); });

  // A bf16 momentum buffer (saved by a bf16 run) is taken up in f32 on load.
  Tensor p_full = param_of(kStart), p_half = param_of(kStart);
  SGD full({p_full}, {.lr = 0.05, .momentum = 0.9}), half({p_half}, {.lr = 0.05, .momentum = 0.9});
  run_steps(full, p_full, 1);
  run_steps(half, p_half, 1);
  NamedTensors state = half.state_tensors();
  for (auto& [name, t] : state)
    if (name == "0.momentum_buffer") t = t.to(DType::bf16);
  half.load_state_tensors(state);
  for (Tensor* p : {&p_full, &p_half}) set_grad(*p, grad_at(1, kStart.size()));
  full.step();
  half.step();
  std::vector<float> a = p_full.to_vector(), b = p_half.to_vector();
  for (std::size_t i = 0; i < a.size(); ++i) REQUIRE(b[i] == Approx(a[i]).epsilon(1e-3));
}

TEST_CASE("loading malformed optimizer state is refused", "[optim]") {
  Tensor p = param_of({1.0f, 2.0f});
  Adam opt({p}, {});
  p.set_grad(Tensor::from_vector<float>({1, 1}, {2}));
  opt.step();
  NamedTensors good = opt.state_tensors();
  REQUIRE(good.size() == 3);
  auto with = [&](std::size_t k, std::string name, Tensor t) {
    NamedTensors s = good;
    s[k] = {std::move(name), std::move(t)};
    return s;
  };
  REQUIRE_THROWS_AS(opt.load_state_tensors(with(1, "0.momentum", Tensor::zeros({2}))), InvalidArgument);
  REQUIRE_THROWS_AS(opt.load_state_tensors(with(1, "3.exp_avg", Tensor::zeros({2}))), InvalidArgument);
  REQUIRE_THROWS_AS(opt.load_state_tensors(with(1, "exp_avg", Tensor::zeros({2}))), InvalidArgument);
  REQUIRE_THROWS_AS(opt.load_state_tensors(with(1, "0.exp_avg", Tensor::zeros({3}))), InvalidArgument);
  NamedTensors missing(good.begin(), good.end() - 1);
  REQUIRE_THROWS_WITH(opt.load_state_tensors(missing), Catch::Contains("incomplete"));
  opt.load_state_tensors(good);  // the real thing still loads, as copies
  REQUIRE_FALSE(opt.state_tensors()[1].second.is_same(good[1].second));
}

TEST_CASE("optimizers validate parameters and options", "[optim]") {
  Tensor p = param_of({1.0f});
  Tensor no_grad = Tensor::from_vector<float>({1.0f}, {1});
  REQUIRE_THROWS_AS(SGD({no_grad}, {}), InvalidArgument);
  REQUIRE_THROWS_AS(SGD({p, p}, {}), InvalidArgument);
  REQUIRE_THROWS_AS(SGD({p}, {.lr = -1.0}), InvalidArgument);
  REQUIRE_THROWS_WITH(SGD({p}, {.momentum = 0.9, .dampening = 0.1, .nesterov = true}),
                      Catch::Contains("Nesterov"));
  REQUIRE_THROWS_AS(Adam({p}, {.beta1 = 1.0}), InvalidArgument);
  REQUIRE_THROWS_AS(AdamW({p}, {.eps = -1.0}), InvalidArgument);
  SGD ok({p}, {.lr = 0.1});
  REQUIRE_THROWS_AS(ok.set_lr(std::nan("")), InvalidArgument);
  ok.set_lr(0.5);
  REQUIRE(ok.lr() == 0.5);
  p.set_grad(Tensor::zeros({2}));
  REQUIRE_THROWS_WITH(ok.step(), Catch::Contains("grad"));
}
