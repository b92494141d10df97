// Exact-match evaluation of an SFT model: each held-out prompt is completed by greedy decoding
// (with the KV cache) and counts as correct only when the generated text is the expected
// response followed by end-of-text. Prompts are split over the ranks; the hit count is summed.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "genesis/data/sft.hpp"
#include "genesis/nn/causal_lm.hpp"
#include "genesis/train/trainer.hpp"
#include "job.hpp"
#include "objective.hpp"
#include "prompt_rows.hpp"

namespace genesis::train {

// A completion as text: without its end-of-text, ids the tokenizer cannot decode (a model's
// vocabulary may be larger) shown as U+FFFD.
std::string completion_text(std::vector<std::int64_t> tokens, const data::TextTokenizer& tokenizer);

// One built-in task's share of an evaluation.
struct TaskExactMatch {
  std::string task;
  double exact_match = 0;
  std::int64_t prompts = 0;
};

// The rewards of completions (an online algorithm's reward sources): the prompts with their
// expected answers (stop id included) and rows, and the completions, one reward per completion.
using CompletionScorer = std::function<std::vector<double>(
    const PromptSet& set, const std::vector<std::vector<std::int64_t>>& completions)>;

struct GenerationEval {
  double exact_match = 0;                // fraction of prompts with answers answered exactly
  double reward = 0;                     // the mean reward of the completions, with a scorer
  std::int64_t prompts = 0;              // prompts scored (over all ranks)
  std::int64_t answered = 0;             // of them, those with an expected answer
  std::vector<TaskExactMatch> by_task;   // per built-in task, in name order; empty for files
  std::vector<GeneratedSample> samples;  // rank 0's first few, for the final report
};

// Answers kept for the final report.
constexpr std::size_t kReportedSamples = 3;

// Collective: every rank calls it with the same examples. limit > 0 scores the first `limit`.
// With `score`, each rank also rewards its completions (each as long as its expected answer and
// its stop id at most, as exact match needs; a prompt without an answer up to `open_limit`
// tokens). Generation stops at `stops`, or when empty at the tokenizer's stop ids.
GenerationEval evaluate_generation(nn::CausalLM& model, const std::vector<data::SftExample>& examples,
                                   const data::TextTokenizer& tokenizer, const Job& job,
                                   std::int64_t limit = 0,
                                   std::size_t samples = kReportedSamples,
                                   const CompletionScorer& score = {},
                                   std::int64_t open_limit = 0,
                                   const std::vector<std::int64_t>& stops = {});

// Collective: when ctx's model is a GPT and there are prompts, adds "exact_match", "prompts",
// "exact_match/<task>" for each built-in task among them (shown after the total) and the samples
// over the budget's prompts to `result`, and with `score` "reward", the greedy completions' mean
// reward: what an online algorithm raises, on prompts it never trained on. The full parameters
// are gathered first (ZeRO-3, until the next forward through the strategy), so each rank decodes
// its own prompts.
// exact_match is left out when no prompt has an answer (prompt-only data).
void add_exact_match(const ObjectiveContext& ctx, const std::vector<data::SftExample>& prompts,
                     const EvalBudget& budget, Evaluation& result,
                     const CompletionScorer& score = {}, std::int64_t open_limit = 0);

}  // namespace genesis::train
