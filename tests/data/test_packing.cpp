// data.packing's rows: best-fit decreasing on hand-made sizes (where it differs from first fit),
// and packed SFT rows in which no example is split, positions restart at each example, targets
// are the unpacked rows' own (so never the next example's first token), a truncated example
// fills a row alone, and the real-token counts add up.
#include <catch2/catch.hpp>

#include <numeric>
#include <string>
#include <vector>

#include "genesis/core/error.hpp"
#include "genesis/data/packing.hpp"

using namespace genesis;
using namespace genesis::data;

namespace {

using Bins = std::vector<std::vector<std::int64_t>>;

// Examples of these token counts (end-of-text included) with these prompt lengths; token j of
// example i is 100 * (i + 1) + j, so every token says whose it is.
SftTokens tokens_of(const std::vector<std::int64_t>& counts,
                    const std::vector<std::int64_t>& prompts) {
  SftTokens t;
  t.starts.push_back(0);
  for (std::size_t i = 0; i < counts.size(); ++i) {
    for (std::int64_t j = 0; j < counts[i]; ++j) {
      t.ids.push_back(static_cast<std::int32_t>(100 * (i + 1) + j));
      t.trained.push_back(j >= prompts[i] ? 1 : 0);
    }
    t.starts.push_back(static_cast<std::int64_t>(t.ids.size()));
  }
  return t;
}

std::vector<std::int64_t> row(const Tensor& t, std::int64_t r) {
  const std::int64_t T = t.size(1);
  const std::int64_t* p = t.data<std::int64_t>() + r * T;
  return {p, p + T};
}

}  // namespace

TEST_CASE("best-fit decreasing: longest first, each into the tightest bin that fits",
          "[data][packing]") {
  CHECK(best_fit_decreasing({7, 5, 3, 3, 2, 2, 6, 1}, 10) == Bins{{0, 2}, {6, 3, 7}, {1, 4, 5}});
  // First fit would put item 3 (size 1) beside the 7 (room 3); best fit puts it where room 2 is
  // left, and the next 1 closes that bin exactly.
  CHECK(best_fit_decreasing({4, 10, 7, 1, 4, 1}, 10) == Bins{{1}, {2}, {0, 4, 3, 5}});
  CHECK(best_fit_decreasing({3, 3, 3}, 3) == Bins{{0}, {1}, {2}});
  CHECK(best_fit_decreasing({}, 4).empty());
  CHECK_THROWS_AS(best_fit_decreasing({2, 5}, 4), InvalidArgument);
  CHECK_THROWS_AS(best_fit_decreasing({0}, 4), InvalidArgument);
}

TEST_CASE("packed SFT rows: whole examples, positions restart, targets stay inside each",
          "[data][packing]") {
  const std::int64_t T = 10, pad = 3;
  // Inputs per example (tokens - 1): 4, 7, 2, 10 (14 tokens, cut to the row), 3, 1.
  const SftTokens tokens = tokens_of({5, 8, 3, 14, 4, 2}, {2, 3, 1, 2, 2, 1});
  const std::vector<SftExample> examples(6, SftExample{"p", "r"});
  CHECK(sft_row_tokens(tokens, T) == std::vector<std::int64_t>{4, 7, 2, 10, 3, 1});
  const SftEncoding unpacked = sft_rows(tokens, examples, pad, T);
  const PackedRows packed = pack_sft(tokens, examples, pad, T);

  REQUIRE(packed.examples == Bins{{3}, {1, 4}, {0, 2, 5}});
  REQUIRE(packed.rows.size() == 3);
  CHECK(packed.row_tokens == std::vector<std::int64_t>{10, 10, 7});
  const std::vector<std::int64_t> lengths = sft_row_tokens(tokens, T);

  std::int64_t scored = 0;
  for (std::int64_t r = 0; r < packed.rows.size(); ++r) {
    INFO("packed row " << r);
    const auto in = row(packed.rows.inputs, r), tg = row(packed.rows.targets, r),
               pos = row(packed.rows.extra, r);
    std::int64_t at = 0;
    for (const std::int64_t e : packed.examples[static_cast<std::size_t>(r)]) {
      INFO("example " << e << " from column " << at);
      const auto u_in = row(unpacked.rows.inputs, e), u_tg = row(unpacked.rows.targets, e);
      const std::int64_t len = lengths[static_cast<std::size_t>(e)];
      for (std::int64_t t = 0; t < len; ++t) {
        CHECK(pos[at + t] == t);          // restarts at the example's first token
        CHECK(in[at + t] == u_in[t]);     // the example whole, in order
        CHECK(tg[at + t] == u_tg[t]);     // its own targets, as unpacked
        CHECK(in[at + t] / 100 == e + 1);  // and only its tokens
        if (tg[at + t] != kIgnoreIndex) {
          ++scored;
          CHECK(tg[at + t] / 100 == e + 1);  // a target is never another example's token
        }
      }
      at += len;
    }
    for (std::int64_t t = at; t < T; ++t) {  // the padding after the last example
      CHECK(in[t] == pad);
      CHECK(tg[t] == kIgnoreIndex);
      CHECK(pos[t] == t - at);
    }
  }
  CHECK(scored == unpacked.response_tokens);
  // The truncated example fills its row: its first 10 inputs and the 10 targets after them.
  CHECK(row(packed.rows.inputs, 0) == row(unpacked.rows.inputs, 3));
  CHECK(row(packed.rows.targets, 0) == row(unpacked.rows.targets, 3));
}

TEST_CASE("pack_rows refuses lengths that do not fit its rows", "[data][packing]") {
  TensorDataset rows{Tensor::zeros({2, 4}, DType::i64), Tensor::zeros({2, 4}, DType::i64)};
  CHECK_THROWS_AS(pack_rows(rows, {1, 5}, 0), InvalidArgument);
  CHECK_THROWS_AS(pack_rows(rows, {1}, 0), InvalidArgument);
  const PackedRows packed = pack_rows(rows, {2, 2}, 0);
  CHECK(packed.rows.size() == 1);
  CHECK(row(packed.rows.extra, 0) == std::vector<std::int64_t>{0, 1, 0, 1});
}
