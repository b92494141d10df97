// The markdown subset of man/prose/*.md turned into roff, so prose reads naturally in the source
// tree and renders in man(1): "## TITLE" sections, "### Title" subsections, paragraphs, "- "
// bullets (continuation lines indented), "term" lines followed by ": definition" lines,
// fenced or 4-space-indented code, and inline `code`, **strong** and *em*. Nothing else.
#include <sstream>

#include "cli/docs_model.hpp"

namespace genesis::docs {
namespace {

// Inline markup on one line of text; everything else is escaped.
std::string inline_roff(const std::string& text) {
  std::string out;
  std::size_t i = 0;
  auto span = [&](const std::string& marker, const char* font) {
    std::size_t close = text.find(marker, i + marker.size());
    if (close == std::string::npos) return false;
    std::string inner = text.substr(i + marker.size(), close - i - marker.size());
    out += std::string("\\f") + font + (marker == "`" ? roff_escape(inner) : inline_roff(inner)) + "\\fR";
    i = close + marker.size();
    return true;
  };
  while (i < text.size()) {
    if (text[i] == '`' && span("`", "B")) continue;
    if (text.compare(i, 2, "**") == 0 && span("**", "B")) continue;
    if (text[i] == '*' && span("*", "I")) continue;
    out += roff_escape(std::string(1, text[i]));
    ++i;
  }
  return out;
}

// A text line must not start with a control character ('.' or '\'').
std::string text_line(const std::string& roff) {
  return (!roff.empty() && (roff[0] == '.' || roff[0] == '\'')) ? "\\&" + roff : roff;
}

std::string trim_left(const std::string& s, std::size_t n) {
  std::size_t k = 0;
  while (k < n && k < s.size() && s[k] == ' ') ++k;
  return s.substr(k);
}

}  // namespace

std::string roff_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\\') out += "\\e";
    else if (c == '-') out += "\\-";
    else out += c;
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> markdown_to_roff(const std::string& markdown) {
  std::vector<std::string> lines;
  std::istringstream in(markdown);
  for (std::string line; std::getline(in, line);) lines.push_back(line);

  std::vector<std::pair<std::string, std::string>> sections;
  std::ostringstream body;
  std::string title;
  auto flush = [&] {
    if (!title.empty()) sections.emplace_back(title, body.str());
    body.str("");
  };

  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (line.rfind("## ", 0) == 0) {
      flush();
      title = line.substr(3);
      for (char& c : title) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    } else if (line.rfind("### ", 0) == 0) {
      body << ".SS " << roff_escape(line.substr(4)) << "\n";
    } else if (line.rfind("# ", 0) == 0 || line.empty()) {
      // The file's own title and blank lines carry no output: blocks below start themselves.
    } else if (line.rfind("```", 0) == 0 || line.rfind("    ", 0) == 0) {
      const bool fenced = line.rfind("```", 0) == 0;
      body << ".PP\n.RS 4\n.nf\n";
      if (fenced) ++i;
      for (; i < lines.size(); ++i) {
        if (fenced ? lines[i].rfind("```", 0) == 0 : lines[i].rfind("    ", 0) != 0) break;
        body << text_line(roff_escape(fenced ? lines[i] : lines[i].substr(4))) << "\n";
      }
      if (!fenced) --i;  // the line that ended the block is ordinary text
      body << ".fi\n.RE\n";
    } else if (line.rfind("- ", 0) == 0) {
      body << ".IP \\(bu 2\n" << text_line(inline_roff(line.substr(2))) << "\n";
      while (i + 1 < lines.size() && lines[i + 1].rfind("  ", 0) == 0)
        body << text_line(inline_roff(trim_left(lines[++i], 2))) << "\n";
    } else if (i + 1 < lines.size() && lines[i + 1].rfind(": ", 0) == 0) {
      body << ".TP\n" << text_line(inline_roff(line)) << "\n";
      body << text_line(inline_roff(lines[++i].substr(2))) << "\n";
      while (i + 1 < lines.size() && lines[i + 1].rfind("  ", 0) == 0)
        body << text_line(inline_roff(trim_left(lines[++i], 2))) << "\n";
    } else {
      body << ".PP\n" << text_line(inline_roff(line)) << "\n";
      while (i + 1 < lines.size() && !lines[i + 1].empty() && lines[i + 1].rfind("- ", 0) != 0 &&
             lines[i + 1].rfind("#", 0) != 0 && lines[i + 1].rfind("```", 0) != 0 &&
             lines[i + 1].rfind("    ", 0) != 0 &&
             !(i + 2 < lines.size() && lines[i + 2].rfind(": ", 0) == 0))
        body << text_line(inline_roff(lines[++i])) << "\n";
    }
  }
  flush();
  return sections;
}

}  // namespace genesis::docs
