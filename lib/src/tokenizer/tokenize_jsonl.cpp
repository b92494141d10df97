// Lines are read in chunks (a few MB), each chunk cut into one contiguous range per thread, the
// ranges converted in parallel into their output text, and the chunk written in order; so output
// is line-aligned with input however many threads run, and memory stays a few chunks. A
// conversation line is rendered by the chat template first (each render is independent, so the
// threads share the template).
#include "genesis/tokenizer/tokenize_jsonl.hpp"

#include <charconv>
#include <filesystem>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "genesis/ckpt/hf_weights.hpp"
#include "genesis/core/error.hpp"

namespace genesis::tokenizer {

namespace {

constexpr std::size_t kChunkBytes = std::size_t{4} << 20;

struct LineResult {
  std::string text;    // the output line, without its newline
  std::string error;   // set when the line failed
};

void append_ids(std::string& out, const std::vector<std::int32_t>& ids) {
  out.append("\"ids\":[");
  char buffer[16];
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i) out.push_back(',');
    auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), ids[i]);
    out.append(buffer, end);
  }
  out.append("]");
}

// {"messages": [...], "add_generation_prompt": bool, "tools": [...], "kwargs": {...}} rendered.
std::string render_conversation(const std::string& line, const TokenizeJsonlOptions& options) {
  if (options.chat_template == nullptr) throw InvalidArgument(options.no_chat_template);
  // Read again keeping the line's key order, which the template sees (tojson prints in it).
  const nlohmann::ordered_json conversation = nlohmann::ordered_json::parse(line);
  const nlohmann::ordered_json& messages = conversation["messages"];
  GENESIS_CHECK(messages.is_array(), InvalidArgument, "\"messages\" must be a list");
  chat::RenderInput input;
  input.messages = &messages;
  if (conversation.contains("add_generation_prompt")) {
    GENESIS_CHECK(conversation["add_generation_prompt"].is_boolean(), InvalidArgument,
                  "\"add_generation_prompt\" must be true or false");
    input.add_generation_prompt = conversation["add_generation_prompt"].get<bool>();
  }
  if (conversation.contains("tools") && !conversation["tools"].is_null())
    input.tools = &conversation["tools"];
  if (conversation.contains("kwargs") && !conversation["kwargs"].is_null()) {
    GENESIS_CHECK(conversation["kwargs"].is_object(), InvalidArgument,
                  "\"kwargs\" must be a JSON object");
    input.kwargs = &conversation["kwargs"];
  }
  return options.chat_template->render(input).text;
}

LineResult convert_line(const Tokenizer& tokenizer, const std::string& line,
                        const TokenizeJsonlOptions& options) {
  LineResult result;
  if (line.find_first_not_of(" \t\r") == std::string::npos) return result;
  try {
    nlohmann::json json;
    try {
      json = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      const std::string what = e.what();
      throw InvalidArgument(what.find("UTF-8") != std::string::npos
                                ? "the line is not valid UTF-8"
                                : "the line is not JSON: " + what);
    }
    if (!options.decode && json.is_object() && json.contains("messages")) {
      const std::string text = render_conversation(line, options);
      result.text = "{\"text\":" + nlohmann::json(text).dump() + ",";
      append_ids(result.text, tokenizer.encode(text, false));
      result.text += "}";
      return result;
    }
    const char* key = options.decode ? "ids" : "text";
    GENESIS_CHECK(json.is_object() && json.contains(key), InvalidArgument,
                  std::string("the line has no \"") + key + "\"" +
                      (options.decode ? "" : " (nor \"messages\")"));
    if (options.decode) {
      const nlohmann::json& ids = json[key];
      GENESIS_CHECK(ids.is_array(), InvalidArgument, "\"ids\" must be a list of integers");
      std::vector<std::int32_t> values;
      values.reserve(ids.size());
      for (const nlohmann::json& id : ids) {
        GENESIS_CHECK(id.is_number_integer(), InvalidArgument,
                      "\"ids\" must be a list of integers");
        values.push_back(id.get<std::int32_t>());
      }
      result.text = nlohmann::json{{"text", tokenizer.decode(values)}}.dump();
    } else {
      const nlohmann::json& text = json[key];
      GENESIS_CHECK(text.is_string(), InvalidArgument, "\"text\" must be a string");
      result.text = "{";
      append_ids(result.text, tokenizer.encode(text.get_ref<const std::string&>(),
                                               options.add_special_tokens));
      result.text += "}";
    }
  } catch (const std::exception& e) {
    result.error = e.what();
    result.text = nlohmann::json{{"error", result.error}}.dump(
        -1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  return result;
}

}  // namespace

Tokenizer load_tokenizer(const std::string& path_or_id, const std::string& key) {
  std::error_code ec;
  if (std::filesystem::exists(path_or_id, ec)) return Tokenizer::load(path_or_id);
  return Tokenizer::load(ckpt::resolve_pretrained(path_or_id, key));
}

std::filesystem::path tokenizer_directory(const std::string& path_or_id, const std::string& key) {
  std::error_code ec;
  std::filesystem::path path = std::filesystem::exists(path_or_id, ec)
                                   ? std::filesystem::path(path_or_id)
                                   : ckpt::resolve_pretrained(path_or_id, key);
  if (!std::filesystem::is_directory(path, ec)) path = path.parent_path();
  return path.empty() ? std::filesystem::path(".") : path;
}

bool holds_tokenizer(const std::filesystem::path& dir) {
  std::error_code ec;
  return std::filesystem::exists(dir / "tokenizer.json", ec) ||
         (std::filesystem::exists(dir / "vocab.json", ec) &&
          std::filesystem::exists(dir / "merges.txt", ec));
}

std::int64_t tokenize_jsonl(const Tokenizer& tokenizer, std::istream& in, std::ostream& out,
                            const TokenizeJsonlOptions& options,
                            const std::function<void(std::int64_t, const std::string&)>& on_error) {
  const int threads = options.threads > 0
                          ? options.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  std::int64_t failed = 0, line_number = 0;
  std::vector<std::string> lines;
  std::vector<LineResult> results;
  // Input is read and output written in blocks: a line at a time through a stream tied to C's
  // stdio would cost as much as the encoding.
  std::string pending, output;
  std::vector<char> block(kChunkBytes);
  bool more = true;
  while (more || !pending.empty()) {
    while (more && pending.size() < kChunkBytes) {
      in.read(block.data(), static_cast<std::streamsize>(block.size()));
      pending.append(block.data(), static_cast<std::size_t>(in.gcount()));
      more = static_cast<bool>(in);
    }
    lines.clear();
    std::size_t start = 0;
    for (std::size_t end; (end = pending.find('\n', start)) != std::string::npos; start = end + 1)
      lines.emplace_back(pending, start, end - start);
    if (!more && start < pending.size()) {  // a last line without its newline
      lines.emplace_back(pending, start);
      start = pending.size();
    }
    pending.erase(0, start);
    results.assign(lines.size(), LineResult{});
    auto work = [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i)
        results[i] = convert_line(tokenizer, lines[i], options);
    };
    const std::size_t per = (lines.size() + threads - 1) / threads;
    {
      std::vector<std::jthread> pool;
      for (int t = 1; t < threads && t * per < lines.size(); ++t)
        pool.emplace_back(work, t * per, std::min(lines.size(), (t + 1) * per));
      work(0, std::min(lines.size(), per));
    }
    output.clear();
    for (LineResult& result : results) {
      ++line_number;
      if (!result.error.empty()) {
        ++failed;
        on_error(line_number, options.input_name + ":" + std::to_string(line_number) + ": " +
                                  result.error);
      }
      output += result.text;
      output += '\n';
    }
    out.write(output.data(), static_cast<std::streamsize>(output.size()));
    if (lines.empty() && !more) break;
  }
  out.flush();
  return failed;
}

}  // namespace genesis::tokenizer
