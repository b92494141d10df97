// Looking at a model: `genesis generate` and `genesis score` as library calls. A model is named
// as users name it: a Hugging Face directory, a Hub id in the local cache, a run directory (its
// latest checkpoint) or a checkpoint. Input and output are JSONL, one output line per input
// line: a line that cannot be processed gets {"error": "..."} in its place, so the output stays
// aligned with the input, and the others go on.
#pragma once

#include <cstdint>
#include <functional>
#include <istream>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "genesis/core/config.hpp"
#include "genesis/data/text_tokenizer.hpp"
#include "genesis/nn/causal_lm.hpp"
#include "genesis/tensor/device.hpp"
#include "genesis/tokenizer/tokenizer.hpp"

namespace genesis::train {

struct InferenceModel {
  std::shared_ptr<nn::CausalLM> model;      // in eval mode, on its device
  std::vector<std::int64_t> eos_token_ids;  // generation stops at any of them
  bool byte_tokenizer = false;              // text in and out through data::ByteTokenizer
  // A Hugging Face model's own tokenizer (tokenizer.json beside its config), for text in and out.
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer;
  // The tokenizer's chat template as a TextTokenizer, when its directory has one: renders
  // {"messages"} lines; its end-of-turn token is among eos_token_ids.
  std::shared_ptr<const data::TextTokenizer> chat;
  std::string description;                  // one line for the log
  // A *ForSequenceClassification directory's pad_token_id: its score is read at the rightmost
  // token that is not this one, as transformers reads it; -1: at the last token (a run's rm).
  std::int64_t score_skips = -1;
};

// auto, cpu or cuda resolved against this machine as training.device is.
Device inference_device(DeviceKind kind);

// Loads MODEL's weights (f32) onto `device`. ConfigError naming MODEL when it is none of the
// kinds above, or its weights do not fit its config.
// A run that trained LoRA adapters loads its base (model.init_from, or the seed's) and its
// checkpoint's adapters over it; `adapter`, when given, is a PEFT adapter directory applied to
// MODEL (a base, not such a run).
InferenceModel load_inference_model(const std::string& model, Device device,
                                    const std::string& adapter = "");

// Called for each line that failed, with its 1-based number and the reason (the caller logs it).
using LineErrorSink = std::function<void(std::int64_t line, const std::string& reason)>;

struct GenerateOptions {
  nn::SamplingOptions sampling;  // stop_tokens: added to the model's EOS ids
  std::uint64_t seed = 0;        // the draws of a sampled run (row i draws from seed + line i)
  std::int64_t batch_size = 8;   // lines generated together
};

// Reads {"ids": [...]}, {"prompt": "..."} or {"messages": [...]} lines (a conversation rendered by
// the tokenizer's chat template with the generation prompt, unless "add_generation_prompt" is
// false), writes {"ids": [new tokens], "text": "..."} lines (text when the model has a
// tokenizer). Returns the number of failed lines.
std::int64_t generate_jsonl(InferenceModel& model, std::istream& in, std::ostream& out,
                            const GenerateOptions& options, const LineErrorSink& on_error);

// Reads {"ids": [...]} or {"text": "..."} lines, writes {"logprobs": [...]}: log p(ids[t] |
// ids[<t]) for t = 1..n-1, in f32. Returns the number of failed lines.
std::int64_t score_jsonl(InferenceModel& model, std::istream& in, std::ostream& out,
                         std::int64_t batch_size, const LineErrorSink& on_error);

}  // namespace genesis::train
