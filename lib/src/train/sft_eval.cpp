// Generation stops at end-of-text or after as many tokens as the expected answer and its
// end-of-text: anything longer is wrong anyway, so a rambling model costs no more than a right one.
#include "sft_eval.hpp"

#include <algorithm>

#include <spdlog/fmt/fmt.h>

namespace genesis::train {

GenerationEval evaluate_generation(nn::GPT& model, const std::vector<data::SftExample>& examples,
                                   const Job& job, std::int64_t limit, std::size_t samples) {
  const data::ByteTokenizer tokenizer;
  const bool training = model.is_training();
  model.eval();
  GenerationEval result;
  const auto n = static_cast<std::int64_t>(limit > 0 ? std::min<std::size_t>(limit, examples.size())
                                                     : examples.size());
  double hits = 0;
  for (std::int64_t i = job.rank(); i < n; i += job.world_size()) {
    const data::SftExample& e = examples[static_cast<std::size_t>(i)];
    std::vector<std::int64_t> expected = tokenizer.encode(e.response);
    expected.push_back(data::ByteTokenizer::kEndOfText);
    const std::vector<std::int64_t> prompt = tokenizer.encode(e.prompt);
    const auto room = model.config().block_size - static_cast<std::int64_t>(prompt.size()) + 1;
    std::vector<std::int64_t> generated =
        model.generate(prompt, std::min<std::int64_t>(static_cast<std::int64_t>(expected.size()), room),
                       data::ByteTokenizer::kEndOfText);
    if (generated == expected) hits += 1;
    if (result.samples.size() < samples) {
      if (!generated.empty() && generated.back() == data::ByteTokenizer::kEndOfText) generated.pop_back();
      // A model with a vocabulary past the tokenizer's may produce ids it cannot decode.
      for (std::int64_t& id : generated)
        if (id < 0 || id >= data::ByteTokenizer::kVocabSize) id = '?';
      result.samples.push_back({e.prompt, e.response, tokenizer.decode(generated)});
    }
  }
  model.train(training);
  std::vector<double> sums{hits};
  job.sum(sums);
  result.prompts = n;
  result.exact_match = n > 0 ? sums[0] / static_cast<double>(n) : 0.0;
  return result;
}

void add_exact_match(const ObjectiveContext& ctx, const std::vector<data::SftExample>& prompts,
                     const EvalBudget& budget, Evaluation& result) {
  auto* gpt = dynamic_cast<nn::GPT*>(&ctx.strategy.module());
  if (prompts.empty() || gpt == nullptr) return;
  ctx.strategy.gather_full_parameters();
  const std::int64_t limit = budget.max_batches > 0 ? budget.max_batches * budget.batch_size : 0;
  GenerationEval g = evaluate_generation(*gpt, prompts, ctx.job, limit);
  result.metrics.push_back(
      {"exact_match", g.exact_match,
       fmt::format("exact match {:.1f}% of {} prompts", g.exact_match * 100.0, g.prompts)});
  result.metrics.push_back({"prompts", g.prompts, "", false});
  result.samples = std::move(g.samples);
}

}  // namespace genesis::train
