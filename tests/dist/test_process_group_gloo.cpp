// ProcessGroupGloo with 2 and 3 ranks as threads: every collective and every ReduceOp with
// results checked exactly (small integers in f32 so sums and products are exact), several dtypes,
// two ops in flight at once, and the timeout report naming the rank that never arrived.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>

#include "genesis/core/error.hpp"
#include "genesis/rendezvous/prefix_store.hpp"
#include "support/thread_ranks.hpp"

using namespace genesis;
using namespace genesis::dist;
using genesis::testing::make_gloo_group;
using genesis::testing::run_ranks;

namespace {

constexpr int kN = 5;
// Rank r's input: element i is (r + 1) * (i % 3 + 1) - i, small enough that PROD stays exact.
float input_value(int r, int i) { return static_cast<float>((r + 1) * (i % 3 + 1) - i); }

Tensor input_tensor(int r, DType dtype = DType::f32) {
  std::vector<float> v;
  for (int i = 0; i < kN; ++i) v.push_back(input_value(r, i));
  return Tensor::from_vector(v, {kN}).to(dtype);
}

std::vector<float> expected_reduction(ReduceOp op, int size) {
  std::vector<float> out;
  for (int i = 0; i < kN; ++i) {
    float acc = input_value(0, i);
    for (int r = 1; r < size; ++r) {
      float x = input_value(r, i);
      switch (op) {
        case ReduceOp::SUM:
        case ReduceOp::AVG: acc += x; break;
        case ReduceOp::PROD: acc *= x; break;
        case ReduceOp::MAX: acc = std::max(acc, x); break;
        case ReduceOp::MIN: acc = std::min(acc, x); break;
      }
    }
    out.push_back(op == ReduceOp::AVG ? acc / static_cast<float>(size) : acc);
  }
  return out;
}

const ReduceOp kAllOps[] = {ReduceOp::SUM, ReduceOp::AVG, ReduceOp::MAX, ReduceOp::MIN,
                            ReduceOp::PROD};

void require_close(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == Approx(want[i]).epsilon(1e-6));
}

}  // namespace

TEST_CASE("gloo all_reduce gives exact results for every ReduceOp", "[process_group]") {
  for (int size : {2, 3}) {
    std::vector<std::map<ReduceOp, std::vector<float>>> got(static_cast<std::size_t>(size));
    run_ranks(size, [&](int r, std::shared_ptr<rendezvous::Store> store) {
      auto pg = make_gloo_group(r, size, store);
      for (ReduceOp op : kAllOps) {
        Tensor t = input_tensor(r);
        pg->all_reduce(t, {.op = op})->wait();
        got[static_cast<std::size_t>(r)][op] = t.to_vector();
      }
    });
    for (int r = 0; r < size; ++r)
      for (ReduceOp op : kAllOps) {
        INFO("size " << size << " rank " << r << " op " << reduce_op_name(op));
        if (op == ReduceOp::AVG)
          require_close(got[static_cast<std::size_t>(r)][op], expected_reduction(op, size));
        else
          REQUIRE(got[static_cast<std::size_t>(r)][op] == expected_reduction(op, size));
      }
  }
}

TEST_CASE("gloo all_reduce works on f16, bf16, i32 and i64", "[process_group]") {
  const DType dtypes[] = {DType::f16, DType::bf16, DType::i32, DType::i64};
  std::vector<std::map<int, std::vector<float>>> got(3);
  run_ranks(3, [&](int r, std::shared_ptr<rendezvous::Store> store) {
    auto pg = make_gloo_group(r, 3, store);
    for (int d = 0; d < 4; ++d) {
      Tensor sum = input_tensor(r, dtypes[d]);
      Tensor prod = input_tensor(r, dtypes[d]);
      pg->all_reduce(sum, {.op = ReduceOp::SUM})->wait();
      pg->all_reduce(prod, {.op = ReduceOp::PROD})->wait();
      if (sum.dtype() != dtypes[d] || prod.dtype() != dtypes[d])
        throw std::runtime_error("all_reduce changed the dtype");
      got[static_cast<std::size_t>(r)][2 * d] = sum.to_vector();
      got[static_cast<std::size_t>(r)][2 * d + 1] = prod.to_vector();
    }
  });
  for (int r = 0; r < 3; ++r)
    for (int d = 0; d < 4; ++d) {
      INFO("rank " << r << " dtype " << dtype_name(dtypes[d]));
      REQUIRE(got[static_cast<std::size_t>(r)][2 * d] == expected_reduction(ReduceOp::SUM, 3));
      REQUIRE(got[static_cast<std::size_t>(r)][2 * d + 1] ==
              expected_reduction(ReduceOp::PROD, 3));
    }
}

namespace {

// What each rank got, by collective (and ReduceOp), flattened.
using Results = std::map<std::string, std::vector<float>>;

void record_list(Results& mine, const std::string& name, const std::vector<Tensor>& list) {
  for (const auto& t : list)
    for (float v : t.to_vector()) mine[name].push_back(v);
}

// broadcast from `root`, all_gather and all_gather_tensor.
void record_broadcast_and_all_gathers(ProcessGroup& pg, int r, int size, int root,
                                      Results& mine) {
  Tensor b = input_tensor(r);
  pg.broadcast(b, {.root = root})->wait();
  mine["broadcast"] = b.to_vector();

  std::vector<Tensor> gathered;
  for (int i = 0; i < size; ++i) gathered.push_back(Tensor::zeros({kN}));
  pg.all_gather(gathered, input_tensor(r))->wait();
  record_list(mine, "all_gather", gathered);
  Tensor flat = Tensor::zeros({kN * size});
  pg.all_gather_tensor(flat, input_tensor(r))->wait();
  mine["all_gather_tensor"] = flat.to_vector();
  // In place: the input is this rank's chunk of the output (ZeRO's updated shard).
  Tensor in_place = Tensor::zeros({kN * size});
  Tensor chunk = in_place.slice(0, r * kN, (r + 1) * kN);
  chunk.copy_(input_tensor(r));
  pg.all_gather_tensor(in_place, chunk)->wait();
  mine["all_gather_in_place"] = in_place.to_vector();
}

// reduce_scatter and reduce_scatter_tensor, SUM and MAX.
void record_reduce_scatters(ProcessGroup& pg, int r, int size, Results& mine) {
  // Rank r contributes input_tensor(r + j) as chunk j, so chunk j reduces ranks' j-shifted rows.
  std::vector<Tensor> chunks;
  Tensor flat_in = Tensor::zeros({kN * size});
  for (int j = 0; j < size; ++j) {
    chunks.push_back(input_tensor(r + j));
    flat_in.slice(0, j * kN, (j + 1) * kN).copy_(input_tensor(r + j));
  }
  for (ReduceOp op : {ReduceOp::SUM, ReduceOp::MAX}) {
    Tensor out = Tensor::zeros({kN});
    pg.reduce_scatter(out, chunks, {.op = op})->wait();
    mine["reduce_scatter" + std::string(reduce_op_name(op))] = out.to_vector();
    Tensor out_flat = Tensor::zeros({kN});
    pg.reduce_scatter_tensor(out_flat, flat_in, {.op = op})->wait();
    mine["reduce_scatter_tensor" + std::string(reduce_op_name(op))] = out_flat.to_vector();
    // An input the caller gives up may be reduced in place: the same result.
    Tensor scratch = flat_in.clone();
    Tensor out_scratch = Tensor::zeros({kN});
    pg.reduce_scatter_tensor(out_scratch, scratch, {.op = op, .input_is_scratch = true})->wait();
    mine["reduce_scatter_scratch" + std::string(reduce_op_name(op))] = out_scratch.to_vector();
    // In place: the output is this rank's chunk of the input (ZeRO-1's shard of its buffer).
    Tensor buffer = flat_in.clone();
    Tensor own = buffer.slice(0, r * kN, (r + 1) * kN);
    pg.reduce_scatter_tensor(own, buffer, {.op = op, .input_is_scratch = true})->wait();
    mine["reduce_scatter_in_place" + std::string(reduce_op_name(op))] = own.to_vector();
  }
}

// reduce (every ReduceOp), gather and scatter, all rooted at `root`; then a barrier.
void record_rooted(ProcessGroup& pg, int r, int size, int root, Results& mine) {
  for (ReduceOp op : kAllOps) {
    Tensor t = input_tensor(r);
    pg.reduce(t, {.op = op, .root = root})->wait();
    if (r == root) mine["reduce" + std::string(reduce_op_name(op))] = t.to_vector();
  }

  std::vector<Tensor> at_root;
  if (r == root)
    for (int i = 0; i < size; ++i) at_root.push_back(Tensor::zeros({kN}));
  pg.gather(at_root, input_tensor(r), {.root = root})->wait();
  record_list(mine, "gather", at_root);

  std::vector<Tensor> to_send;
  if (r == root)
    for (int i = 0; i < size; ++i) to_send.push_back(input_tensor(10 + i));
  Tensor piece = Tensor::zeros({kN});
  pg.scatter(piece, to_send, {.root = root})->wait();
  mine["scatter"] = piece.to_vector();
  pg.barrier()->wait();
}

// What rank r's chunk of a reduce_scatter with `op` holds: rank q contributed input_tensor(q + r).
std::vector<float> expected_reduce_scatter(ReduceOp op, int size, int r) {
  std::vector<float> want(kN, op == ReduceOp::SUM ? 0.0f : -1e30f);
  for (int q = 0; q < size; ++q) {
    auto row = input_tensor(q + r).to_vector();  // rank q's chunk r
    for (int i = 0; i < kN; ++i)
      want[i] = op == ReduceOp::SUM ? want[i] + row[i] : std::max(want[i], row[i]);
  }
  return want;
}

}  // namespace

TEST_CASE("gloo broadcast, all_gather, reduce_scatter, reduce, gather, scatter", "[process_group]") {
  for (int size : {2, 3}) {
    const int root = size - 1;
    std::vector<Results> got(static_cast<std::size_t>(size));
    run_ranks(size, [&](int r, std::shared_ptr<rendezvous::Store> store) {
      auto pg = make_gloo_group(r, size, store);
      auto& mine = got[static_cast<std::size_t>(r)];
      record_broadcast_and_all_gathers(*pg, r, size, root, mine);
      record_reduce_scatters(*pg, r, size, mine);
      record_rooted(*pg, r, size, root, mine);
    });

    std::vector<float> all_inputs;
    for (int i = 0; i < size; ++i)
      for (float v : input_tensor(i).to_vector()) all_inputs.push_back(v);
    for (int r = 0; r < size; ++r) {
      INFO("size " << size << " rank " << r);
      auto& mine = got[static_cast<std::size_t>(r)];
      REQUIRE(mine["broadcast"] == input_tensor(root).to_vector());
      REQUIRE(mine["all_gather"] == all_inputs);
      REQUIRE(mine["all_gather_tensor"] == all_inputs);
      REQUIRE(mine["all_gather_in_place"] == all_inputs);
      for (ReduceOp op : {ReduceOp::SUM, ReduceOp::MAX}) {
        const std::vector<float> want = expected_reduce_scatter(op, size, r);
        REQUIRE(mine["reduce_scatter" + std::string(reduce_op_name(op))] == want);
        REQUIRE(mine["reduce_scatter_tensor" + std::string(reduce_op_name(op))] == want);
        REQUIRE(mine["reduce_scatter_scratch" + std::string(reduce_op_name(op))] == want);
        REQUIRE(mine["reduce_scatter_in_place" + std::string(reduce_op_name(op))] == want);
      }
      if (r == root) {
        for (ReduceOp op : kAllOps)
          require_close(mine["reduce" + std::string(reduce_op_name(op))],
                        expected_reduction(op, size));
        REQUIRE(mine["gather"] == all_inputs);
      }
      REQUIRE(mine["scatter"] == input_tensor(10 + r).to_vector());
    }
  }
}

TEST_CASE("gloo send and recv move a tensor between two ranks", "[process_group]") {
  std::vector<std::vector<float>> got(2);
  run_ranks(2, [&](int r, std::shared_ptr<rendezvous::Store> store) {
    auto pg = make_gloo_group(r, 2, store);
    Tensor t = r == 0 ? input_tensor(7) : Tensor::zeros({kN});
    Tensor back = r == 1 ? input_tensor(8) : Tensor::zeros({kN});
    if (r == 0) {
      pg->send(t, 1, 3)->wait();
      pg->recv(back, 1, 4)->wait();
      got[0] = back.to_vector();
    } else {
      pg->recv(t, 0, 3)->wait();
      pg->send(back, 0, 4)->wait();
      got[1] = t.to_vector();
    }
  });
  REQUIRE(got[1] == input_tensor(7).to_vector());
  REQUIRE(got[0] == input_tensor(8).to_vector());
}

TEST_CASE("gloo ops run asynchronously in submission order", "[process_group]") {
  std::vector<std::vector<float>> first(2), second(2);
  run_ranks(2, [&](int r, std::shared_ptr<rendezvous::Store> store) {
    auto pg = make_gloo_group(r, 2, store);
    Tensor a = Tensor::full({1 << 16}, r + 1.0);
    Tensor b = Tensor::full({3}, 10.0 * (r + 1));
    auto wa = pg->all_reduce(a);
    auto wb = pg->all_reduce(b, {.op = ReduceOp::MAX});
    wa->wait();
    wb->wait();
    if (!wa->is_completed() || !wb->is_completed()) throw std::runtime_error("not completed");
    first[static_cast<std::size_t>(r)] = {a.to_vector().front(), a.to_vector().back()};
    second[static_cast<std::size_t>(r)] = b.to_vector();
  });
  for (int r = 0; r < 2; ++r) {
    REQUIRE(first[static_cast<std::size_t>(r)] == std::vector<float>{3.0f, 3.0f});
    REQUIRE(second[static_cast<std::size_t>(r)] == std::vector<float>{20.0f, 20.0f, 20.0f});
  }
}

TEST_CASE("a timed-out gloo op names the op, its number and the missing rank", "[process_group]") {
  std::vector<std::string> errors(3), after(3);
  run_ranks(3, [&](int r, std::shared_ptr<rendezvous::Store> store) {
    auto pg = make_gloo_group(r, 3, store);  // a long group default; the op sets its own
    Tensor t = input_tensor(r);
    pg->all_reduce(t)->wait();  // #1: everyone
    if (r == 2) {
      // Rank 2 skips #2 but keeps its connections open until the others have timed out.
      store->wait({"test/done0", "test/done1"}, std::chrono::seconds(20));
      return;
    }
    try {
      pg->all_reduce(t, {.timeout = std::chrono::milliseconds(400)})->wait();
    } catch (const CommError& e) {
      errors[static_cast<std::size_t>(r)] = e.what();
    }
    try {
      pg->barrier()->wait();
    } catch (const CommError& e) {
      after[static_cast<std::size_t>(r)] = e.what();
    }
    store->set("test/done" + std::to_string(r), "1");
  });
  for (int r = 0; r < 2; ++r) {
    INFO(errors[static_cast<std::size_t>(r)]);
    REQUIRE(errors[static_cast<std::size_t>(r)] ==
            "all_reduce #2 on rank " + std::to_string(r) +
                " timed out after 400 ms; ranks that never arrived: 2");
    REQUIRE_THAT(after[static_cast<std::size_t>(r)],
                 Catch::Contains("barrier #3") && Catch::Contains("group is broken"));
  }
}

TEST_CASE("a gloo rendezvous that a rank never joins times out", "[process_group]") {
  auto store = std::make_shared<rendezvous::HashStore>();
  REQUIRE_THROWS_WITH(make_gloo_group(0, 2, store, std::chrono::milliseconds(300)),
                      Catch::Contains("gloo rendezvous of rank 0 of 2 did not complete") &&
                          Catch::Contains("store timeout after 300 ms"));
}

TEST_CASE("gloo subgroups over prefix stores run beside the world group", "[process_group]") {
  std::vector<std::vector<float>> world(3), sub(3);
  run_ranks(3, [&](int r, std::shared_ptr<rendezvous::Store> store) {
    auto pg = make_gloo_group(r, 3, std::make_shared<rendezvous::PrefixStore>("world", store));
    std::shared_ptr<ProcessGroupGloo> pair;
    if (r != 1)  // ranks {0, 2} become subgroup ranks {0, 1}
      pair = make_gloo_group(r == 0 ? 0 : 1, 2,
                             std::make_shared<rendezvous::PrefixStore>("group_1", store));
    Tensor w = input_tensor(r);
    pg->all_reduce(w)->wait();
    world[static_cast<std::size_t>(r)] = w.to_vector();
    if (pair) {
      Tensor s = input_tensor(r);
      pair->all_reduce(s)->wait();
      sub[static_cast<std::size_t>(r)] = s.to_vector();
    }
  });
  std::vector<float> want_sub;
  for (int i = 0; i < kN; ++i) want_sub.push_back(input_value(0, i) + input_value(2, i));
  for (int r = 0; r < 3; ++r) REQUIRE(world[static_cast<std::size_t>(r)] ==
                                      expected_reduction(ReduceOp::SUM, 3));
  REQUIRE(sub[0] == want_sub);
  REQUIRE(sub[2] == want_sub);
}

TEST_CASE("process groups reject bad arguments before communicating", "[process_group]") {
  auto pg = make_single_rank_group("gloo");
  Tensor ok = input_tensor(0);
  Tensor strided = Tensor::zeros({4, 4}).transpose(0, 1);
  Tensor flags = Tensor::zeros({3}, DType::boolean);
  Tensor ints = Tensor::zeros({3}, DType::i32);
  REQUIRE_THROWS_AS(pg->all_reduce(strided), InvalidArgument);
  REQUIRE_THROWS_AS(pg->all_reduce(flags), InvalidArgument);
  REQUIRE_THROWS_WITH(pg->all_reduce(ints, {.op = ReduceOp::AVG}), Catch::Contains("AVG"));
  REQUIRE_THROWS_WITH(pg->broadcast(ok, {.root = 1}), Catch::Contains("root 1"));
  std::vector<Tensor> two = {Tensor::zeros({kN}), Tensor::zeros({kN})};
  REQUIRE_THROWS_WITH(pg->all_gather(two, ok), Catch::Contains("needs 1 outputs"));
  REQUIRE_THROWS_AS(pg->send(ok, 0), InvalidArgument);

  // The Gloo group runs the same checks on the caller's thread.
  std::vector<int> rejected(2, 0);
  run_ranks(2, [&](int r, std::shared_ptr<rendezvous::Store> store) {
    auto gloo = make_gloo_group(r, 2, store);
    Tensor mine = input_tensor(r);
    try { gloo->reduce(mine, {.root = 2}); } catch (const InvalidArgument&) { ++rejected[r]; }
    try { gloo->all_reduce(flags); } catch (const InvalidArgument&) { ++rejected[r]; }
    try { gloo->send(mine, r); } catch (const InvalidArgument&) { ++rejected[r]; }
    gloo->barrier()->wait();
  });
  REQUIRE(rejected == std::vector<int>{3, 3});
}

TEST_CASE("the single-rank group copies and completes at once", "[process_group]") {
  auto pg = make_single_rank_group("gloo");
  REQUIRE(pg->size() == 1);
  Tensor t = input_tensor(4);
  auto work = pg->all_reduce(t, {.op = ReduceOp::AVG});
  REQUIRE(work->is_completed());
  REQUIRE(t.to_vector() == input_tensor(4).to_vector());
  std::vector<Tensor> out = {Tensor::zeros({kN})};
  pg->all_gather(out, t)->wait();
  REQUIRE(out[0].to_vector() == t.to_vector());
  Tensor piece = Tensor::zeros({kN});
  pg->reduce_scatter_tensor(piece, input_tensor(2))->wait();
  REQUIRE(piece.to_vector() == input_tensor(2).to_vector());
}

TEST_CASE("a single-rank nccl group (a one-GPU run) takes GPU tensors, not host ones",
          "[process_group]") {
  // A one-GPU run reduces gradients that live on the GPU; a host tensor there is a bug in the
  // caller and must say which device was expected rather than silently copy.
  auto pg = make_single_rank_group("nccl", Device::cuda(0));
  REQUIRE(pg->backend_name() == "nccl");
  Tensor host = input_tensor(0);
  REQUIRE_THROWS_WITH(pg->all_reduce(host), Catch::Contains("must be a CUDA tensor"));
  std::vector<Tensor> out = {Tensor::zeros({kN})};
  REQUIRE_THROWS_WITH(pg->all_gather(out, host), Catch::Contains("must be a CUDA tensor"));
  // The gloo one still names the host.
  auto gloo = make_single_rank_group("gloo");
  Tensor ok = input_tensor(0);
  REQUIRE_NOTHROW(gloo->all_reduce(ok)->wait());
}
