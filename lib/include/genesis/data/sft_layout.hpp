// How one SFT example becomes tokens and a loss mask, as TRL's SFTTrainer makes them: one text
// (prompt and completion joined, a text, or a conversation through the tokenizer's chat
// template) encoded whole, as the model reads it, and the byte ranges the loss covers carried
// onto its tokens. A range's edge lands after the tokens that encoding the text up to the edge
// shares with encoding it whole: TRL's check that the prompt's tokens begin the prompt and
// completion's, made at every edge.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "genesis/data/sft.hpp"

namespace genesis::data {

struct ExampleText {
  std::string text;
  std::vector<std::pair<std::size_t, std::size_t>> trained;  // byte ranges, in order
  bool add_special_tokens = true;  // the tokenizer's leading special tokens (a BOS)
  bool end_of_text = true;         // end-of-text appended, and trained
};

// The text of `example` and what of it is trained, per `loss`:
//   prompt_completion  prompt + completion; the completion (or everything) trained.
//   text               the text, all trained.
//   conversation       rendered by tokenizer.render_chat. With a prompt part (TRL's
//                      conversational prompt-completion): the prompt rendered with its generation
//                      prompt must begin the whole, and the rest is trained. Otherwise each
//                      assistant turn is trained: the template's {% generation %} ranges, or the
//                      part each assistant message adds to the conversation before it (with a
//                      generation prompt) up to and including its end-of-turn token.
// ConfigError naming the example's origin where a template raises, renders a prefix that does
// not begin the whole conversation, or leaves nothing to train.
ExampleText example_text(const SftExample& example, const TextTokenizer& tokenizer,
                         const SftLoss& loss);

struct ExampleTokens {
  std::vector<std::int64_t> ids;
  std::vector<std::uint8_t> trained;  // per id
};
ExampleTokens tokenize_example(const ExampleText& text, const TextTokenizer& tokenizer);

// For generation from an example: the tokens before its last trained run (the prompt) and that
// run up to and including its first stop id (the answer expected). An example without an answer
// (has_answer) gives its whole prompt, a conversation's with its generation prompt, and no answer.
struct PromptAnswer {
  std::vector<std::int64_t> prompt, answer;
};
PromptAnswer prompt_and_answer(const SftExample& example, const TextTokenizer& tokenizer);

}  // namespace genesis::data
