// Generation stops at end-of-text or after as many tokens as the expected answer and its
// end-of-text: anything longer is wrong anyway, so a rambling model costs no more than a right one.
// Each rank completes its prompts in batches (one forward per generated position for a batch).
#include "sft_eval.hpp"

#include <algorithm>
#include <map>

#include <spdlog/fmt/fmt.h>

#include "genesis/data/sft_layout.hpp"

namespace genesis::train {

namespace {

// Prompts completed together: enough to amortise a step over many rows, small enough that a
// batch's padding and its longest answer cost little.
constexpr std::size_t kGenerationBatch = 64;

}  // namespace

std::string completion_text(std::vector<std::int64_t> tokens, const data::TextTokenizer& tokenizer) {
  if (!tokens.empty() && tokens.back() == tokenizer.end_of_text()) tokens.pop_back();
  return tokenizer.decode(tokens);
}

GenerationEval evaluate_generation(nn::CausalLM& model, const std::vector<data::SftExample>& examples,
                                   const data::TextTokenizer& tokenizer, const Job& job,
                                   std::int64_t limit, std::size_t samples,
                                   const CompletionScorer& score, std::int64_t open_limit,
                                   const std::vector<std::int64_t>& stops) {
  const bool training = model.is_training();
  model.eval();
  GenerationEval result;
  const auto n = static_cast<std::int64_t>(limit > 0 ? std::min<std::size_t>(limit, examples.size())
                                                     : examples.size());
  // This rank's prompts, kGenerationBatch at a time, greedy.
  std::vector<std::int64_t> mine;
  for (std::int64_t i = job.rank(); i < n; i += job.world_size()) mine.push_back(i);
  double hits = 0, rewards = 0, answered = 0;
  // Each built-in task's hits and prompts, in the name order every rank shares.
  struct Count {
    double hits = 0, prompts = 0;
  };
  std::map<std::string, Count> tasks;
  for (std::int64_t i = 0; i < n; ++i)
    if (const std::string& t = examples[static_cast<std::size_t>(i)].task; !t.empty()) tasks[t];
  Generator unused;
  for (std::size_t first = 0; first < mine.size(); first += kGenerationBatch) {
    const std::size_t count = std::min(kGenerationBatch, mine.size() - first);
    PromptSet set;
    std::vector<std::int64_t> limits;
    for (std::size_t k = 0; k < count; ++k) {
      const data::SftExample& e = examples[static_cast<std::size_t>(mine[first + k])];
      data::PromptAnswer pa = data::prompt_and_answer(e, tokenizer);
      set.prompts.push_back(std::move(pa.prompt));
      set.answers.push_back(std::move(pa.answer));
      set.rows.push_back(e.row);
      const auto expected = static_cast<std::int64_t>(set.answers.back().size());
      limits.push_back(expected > 0 ? expected : open_limit);
    }
    std::vector<std::vector<std::int64_t>> generated = model.generate(
        set.prompts,
        {.stop_token = tokenizer.end_of_text(),
         .stop_tokens = stops.empty() ? tokenizer.stop_ids() : stops},
        unused, limits);
    if (score)
      for (double r : score(set, generated)) rewards += r;
    for (std::size_t k = 0; k < count; ++k) {
      const data::SftExample& e = examples[static_cast<std::size_t>(mine[first + k])];
      const bool hit = !set.answers[k].empty() && generated[k] == set.answers[k];
      hits += hit ? 1 : 0;
      answered += set.answers[k].empty() ? 0 : 1;
      if (!e.task.empty()) {
        tasks[e.task].hits += hit ? 1 : 0;
        tasks[e.task].prompts += 1;
      }
      if (result.samples.size() >= samples) continue;
      result.samples.push_back(
          {e.prompt, e.response, completion_text(std::move(generated[k]), tokenizer)});
    }
  }
  model.train(training);
  std::vector<double> sums{hits, rewards, answered};
  for (const auto& [task, count] : tasks) sums.insert(sums.end(), {count.hits, count.prompts});
  job.sum(sums);
  result.prompts = n;
  result.answered = static_cast<std::int64_t>(sums[2]);
  result.exact_match = sums[2] > 0 ? sums[0] / sums[2] : 0.0;
  result.reward = n > 0 ? sums[1] / static_cast<double>(n) : 0.0;
  std::size_t at = 3;
  for (const auto& [task, count] : tasks) {
    const double scored = sums[at + 1];
    result.by_task.push_back({task, scored > 0 ? sums[at] / scored : 0.0,
                              static_cast<std::int64_t>(scored)});
    at += 2;
  }
  return result;
}

void add_exact_match(const ObjectiveContext& ctx, const std::vector<data::SftExample>& prompts,
                     const EvalBudget& budget, Evaluation& result,
                     const CompletionScorer& score, std::int64_t open_limit) {
  auto* gpt = dynamic_cast<nn::CausalLM*>(&ctx.strategy.module());
  if (prompts.empty() || gpt == nullptr) return;
  ctx.strategy.gather_full_parameters();
  const std::int64_t limit = budget.max_batches > 0 ? budget.max_batches * budget.batch_size : 0;
  const data::ByteTextTokenizer bytes;
  const data::TextTokenizer& tokenizer = ctx.tokenizer ? *ctx.tokenizer : bytes;
  GenerationEval g = evaluate_generation(*gpt, prompts, tokenizer, ctx.job, limit,
                                         kReportedSamples, score, open_limit, ctx.stop_ids);
  if (g.answered == 0) {  // prompt-only data: the rewards alone say how it does
    result.metrics.push_back({"prompts", g.prompts, "", false});
    if (score)
      result.metrics.push_back({"reward", g.reward,
                                fmt::format("reward {:.3f} over {} prompts", g.reward, g.prompts)});
    result.samples = std::move(g.samples);
    return;
  }
  std::string text =
      fmt::format("exact match {:.1f}% of {} prompts", g.exact_match * 100.0, g.answered);
  if (g.by_task.size() > 1) {  // where the misses are: "(add 2.0%, copy 100.0%, ...)"
    std::vector<std::string> parts;
    for (const TaskExactMatch& t : g.by_task)
      parts.push_back(fmt::format("{} {:.1f}%", t.task, t.exact_match * 100.0));
    text += fmt::format(" ({})", fmt::join(parts, ", "));
  }
  result.metrics.push_back({"exact_match", g.exact_match, text});
  result.metrics.push_back({"prompts", g.prompts, "", false});
  for (const TaskExactMatch& t : g.by_task)
    result.metrics.push_back({"exact_match/" + t.task, t.exact_match, ""});
  if (score) result.metrics.push_back({"reward", g.reward, fmt::format("reward {:.3f}", g.reward)});
  result.samples = std::move(g.samples);
}

}  // namespace genesis::train
