// config_to_toml: the resolved config as a commented TOML file (what --print-config shows), one
// line per schema key with its help text, so the output documents itself and loads back into
// the same Config.
#include <sstream>

#include "config_value.hpp"

namespace genesis {
using namespace config_detail;

std::string config_to_toml(const Config& config) {
  struct Line {
    std::string section, text;
    std::string help;
  };
  std::vector<Line> lines;
  for (const auto& key : config_schema()) {
    auto dot = key.name.find('.');
    std::string section = dot == std::string_view::npos ? "" : std::string(key.name.substr(0, dot));
    std::string leaf(dot == std::string_view::npos ? key.name : key.name.substr(dot + 1));
    std::string help(key.help);
    if (auto from = config.from_deepspeed.find(std::string(key.name));
        from != config.from_deepspeed.end())
      help = "from " + config.distributed.deepspeed_config + ": " + from->second + "; " + help;
    lines.push_back({section, leaf + " = " + describe_node(*value_node(config, key)), help});
  }
  // Comments line up in one column, capped so one long value does not push every comment right.
  std::size_t column = 0;
  for (const auto& line : lines) column = std::max(column, std::min<std::size_t>(line.text.size(), 40));

  std::ostringstream os;
  os << "# genesis config, resolved from defaults, preset, --config and --set (in that order)\n";
  if (!config.distributed.deepspeed_config.empty())
    os << "# with " << config.distributed.deepspeed_config
       << " (DeepSpeed) between preset and --config: the settings it made say \"from\" it\n";
  std::string section;
  for (const auto& line : lines) {
    if (line.section != section) {
      section = line.section;
      os << "\n[" << section << "]\n";
    }
    os << line.text << std::string(column > line.text.size() ? column - line.text.size() : 0, ' ')
       << "  # " << line.help << "\n";
  }
  return os.str();
}

}  // namespace genesis
