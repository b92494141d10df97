// A SAX handler in front of nlohmann's DOM builder: it sees every key and every container before
// the builder does, and returning false from it stops the parse at once (so a 100 MB header of
// '[' costs nothing before it is refused).
#include "checked_json.hpp"

#include <algorithm>
#include <set>

namespace genesis::ckpt::detail {
namespace {

using Json = nlohmann::json;

class CheckingSax {
 public:
  CheckingSax(CheckedJson& out, int max_depth) : out_(out), dom_(out.value, false), max_depth_(max_depth) {}

  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(Json::number_integer_t v) { return dom_.number_integer(v); }
  bool number_unsigned(Json::number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool number_float(Json::number_float_t v, const std::string& s) { return dom_.number_float(v, s); }
  bool string(std::string& v) { return dom_.string(v); }
  bool binary(Json::binary_t& v) { return dom_.binary(v); }

  bool start_object(std::size_t n) {
    if (!enter()) return false;
    keys_.emplace_back();
    return dom_.start_object(n);
  }
  bool key(std::string& k) {
    if (!keys_.back().insert(k).second) {
      out_.duplicate = k;
      out_.duplicate_at_top = depth_ == 1;
      return fail("duplicate key \"" + excerpt(k) + "\"");
    }
    if (depth_ == 1) out_.top_keys.push_back(k);
    return dom_.key(k);
  }
  bool end_object() {
    keys_.pop_back();
    --depth_;
    return dom_.end_object();
  }
  bool start_array(std::size_t n) { return enter() && dom_.start_array(n); }
  bool end_array() {
    --depth_;
    return dom_.end_array();
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    return fail(excerpt(e.what(), 200));
  }

 private:
  bool enter() {
    if (++depth_ > max_depth_)
      return fail("nested deeper than " + std::to_string(max_depth_) + " levels");
    return true;
  }
  bool fail(std::string why) {
    if (out_.error.empty()) out_.error = std::move(why);
    return false;
  }

  CheckedJson& out_;
  nlohmann::detail::json_sax_dom_parser<Json> dom_;
  int max_depth_;
  int depth_ = 0;
  std::vector<std::set<std::string>> keys_;  // per open object, the keys seen so far
};

}  // namespace

CheckedJson parse_checked_json(std::string_view text, int max_depth) {
  CheckedJson out;
  // nlohmann's lexer takes a NUL byte for the end of input, so "{...}\0<anything>" would parse;
  // in JSON text a raw NUL is never valid (inside strings it must be escaped).
  if (const auto nul = text.find('\0'); nul != std::string_view::npos) {
    out.error = "a NUL byte at offset " + std::to_string(nul);
    out.value = nullptr;
    return out;
  }
  CheckingSax sax(out, max_depth);
  const bool ok = Json::sax_parse(text.begin(), text.end(), &sax, nlohmann::json::input_format_t::json,
                                  /*strict=*/true, /*ignore_comments=*/false);
  if (!ok && out.error.empty()) out.error = "not valid JSON";
  if (!out.error.empty()) out.value = nullptr;
  return out;
}

std::string excerpt(std::string_view text, std::size_t max) {
  std::size_t cut = std::min(max, text.size());
  // Never split a UTF-8 sequence: the message may end up in JSON output, which needs valid UTF-8.
  while (cut < text.size() && cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) --cut;
  std::string out;
  for (char c : text.substr(0, cut)) out += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '?' : c;
  if (cut < text.size()) out += "...";
  return out;
}

}  // namespace genesis::ckpt::detail
