// The end of a run as the user sees it: the SFT figures added to summary.json, and the final
// report on stdout (the totals, then a few held-out prompts with what the model answered).
#pragma once

#include <ostream>

#include <nlohmann/json.hpp>

#include "genesis/train/trainer.hpp"

namespace genesis::train {

// eval_exact_match, eval_prompts and samples (prompt, expected, generated) for an SFT run;
// nothing for other runs.
void add_generation_summary(const TrainResult& result, nlohmann::json& summary);

// "done: 600 steps in 3:12; final loss ..., 24000 tok/s", the SFT lines, and "summary: PATH".
void print_final_report(const TrainResult& result, const char* rate_unit, std::ostream& out);

}  // namespace genesis::train
