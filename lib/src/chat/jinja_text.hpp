// Python's str semantics over UTF-8 text, as the chat-template interpreter needs them: lengths and
// indices count code points, whitespace is str.isspace()'s, case mapping is full Unicode case
// mapping (ICU), repr() quotes and escapes as Python does, and floats print as Python's repr.
// Text reaching these functions is valid UTF-8 (templates are checked at load, JSON at parsing).
// Not here: str.format and %-formatting.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace genesis::chat::jinja {

bool is_ascii(std::string_view text);
std::u32string to_u32(std::string_view text);
std::string to_utf8(std::u32string_view text);
void append_code_point(std::string& out, char32_t cp);
// Number of code points (Python's len()).
std::size_t code_point_count(std::string_view text);
// Byte offset of code point `index` (index <= count), for slicing without decoding everything.
std::size_t byte_offset_of(std::string_view text, std::size_t index);

bool is_space(char32_t cp);      // str.isspace()
bool is_printable(char32_t cp);  // str.isprintable(): what repr() leaves unescaped

std::string to_upper(std::string_view text);
std::string to_lower(std::string_view text);
std::string to_title(std::string_view text);         // str.title()
std::string to_capitalized(std::string_view text);   // str.capitalize()
std::string to_swapped_case(std::string_view text);  // str.swapcase()

// strip/lstrip/rstrip: `chars` unset strips whitespace, else any of its code points.
enum class StripSide { both, left, right };
std::string strip(std::string_view text, const std::optional<std::string>& chars, StripSide side);
// str.split / str.rsplit: `sep` unset splits on runs of whitespace and drops empty pieces;
// maxsplit < 0 is unlimited.
std::vector<std::string> split(std::string_view text, const std::optional<std::string>& sep,
                               std::int64_t maxsplit, bool from_right);
std::vector<std::string> split_lines(std::string_view text, bool keep_ends);
// Python's predicates over a whole string (false for ""), e.g. str.isdigit().
enum class CharClass { digit, decimal, numeric, alpha, alnum, space, lower, upper, title };
bool all_of_class(std::string_view text, CharClass which);

// repr() of a str: single quotes unless it holds ' and no ", escapes for what is not printable.
std::string repr_string(std::string_view text);
// repr() of a float: the shortest text that reads back, 1.0, 1e-05, 1e+16, inf, nan.
std::string repr_float(double value);

}  // namespace genesis::chat::jinja
