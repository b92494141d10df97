// The genesis side of tests/chat/compare.sh: renders JSONL cases with genesis::chat::ChatTemplate,
// one output line per case, as reference/render.py renders them with jinja2:
//   {"name", "text", "generation": [[begin, end], ...]}   (UTF-8 byte offsets)
//   {"name", "error", "raised"}                             (raised: by raise_exception)
// A case: {"name", "template": {"source"} | {"file", "tokenizer_dir"?} | {"dir", "name"?},
// "special_tokens"?, "messages", "tools"?, "add_generation_prompt"?, "kwargs"?}.
// A template that fails to load is that case's error. The clock is GENESIS_CHAT_TEMPLATE_NOW.
//
//   genesis_chat_render < cases.jsonl > genesis.jsonl
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "genesis/chat/chat_template.hpp"

namespace {

using genesis::chat::ChatTemplate;
using nlohmann::ordered_json;

ChatTemplate load_template(const ordered_json& c) {
  const ordered_json& t = c.at("template");
  if (t.contains("source")) {
    return ChatTemplate::from_source(t["source"].get<std::string>(), c.value("name", "case"),
                                     c.value("special_tokens", ordered_json::object()));
  }
  if (t.contains("file"))
    return ChatTemplate::from_file(t["file"].get<std::string>(), t.value("tokenizer_dir", ""));
  return ChatTemplate::load(t.at("dir").get<std::string>(), t.value("name", ""));
}

ordered_json render_case(const ordered_json& c) {
  ordered_json out;
  out["name"] = c.value("name", "");
  try {
    const ChatTemplate chat_template = load_template(c);
    genesis::chat::RenderInput input;
    input.messages = &c.at("messages");
    if (c.contains("tools") && !c["tools"].is_null()) input.tools = &c["tools"];
    input.add_generation_prompt = c.value("add_generation_prompt", false);
    if (c.contains("kwargs")) input.kwargs = &c["kwargs"];
    const genesis::chat::Rendered rendered = chat_template.render(input);
    out["text"] = rendered.text;
    out["generation"] = ordered_json::array();
    for (const auto& [begin, end] : rendered.generation) out["generation"].push_back({begin, end});
  } catch (const genesis::chat::ChatTemplateError& e) {
    out["error"] = e.what();
    out["raised"] = e.raised();
    if (e.raised()) out["message"] = e.reason();
  } catch (const genesis::Error& e) {
    out["error"] = e.what();
    out["raised"] = false;
  }
  return out;
}

}  // namespace

int main() {
  std::string line;
  int status = 0;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    try {
      std::cout << render_case(ordered_json::parse(line))
                       .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                << '\n';
    } catch (const std::exception& e) {
      std::cerr << "genesis_chat_render: a case failed outside genesis's errors: " << e.what()
                << '\n';
      std::cout << ordered_json{{"error", std::string("driver: ") + e.what()}, {"raised", false}}
                << '\n';
      status = 1;
    }
  }
  return status;
}
