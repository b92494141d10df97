// How `genesis doctor` shows its checks: a compact aligned table in the manner of ds_report and
// brew doctor (one line per check, a hint line under each warn/FAIL, a closing tally), or one JSON
// object for scripts. Everything writes to the stream it is given; colour is the caller's choice.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

#include "genesis/doctor/doctor.hpp"

namespace genesis::doctor {

// "ok", "warn", "FAIL": the table's spelling (a failure should stand out).
std::string status_label(CheckStatus status);
// "ok", "warn", "fail": the JSON spelling.
std::string status_name(CheckStatus status);

struct Tally {
  int ok = 0;
  int warn = 0;
  int fail = 0;
};
Tally tally(const std::vector<CheckResult>& checks);
// True when no check failed; doctor's exit code is 0 exactly then.
bool all_passed(const std::vector<CheckResult>& checks);

// One check as the table shows it: "  ok    cpu          2 cores, ..." and, for warn and fail,
// "        hint: ..." on the next line. name_width pads the name column. No trailing newline.
std::string format_check(const CheckResult& check, std::size_t name_width, bool color);

// The whole table, then "doctor: 9 ok, 2 warn, 0 FAIL".
void write_text_report(std::ostream& out, const std::vector<CheckResult>& checks, bool color);

// {"checks": [{"name", "status", "detail", "hint", "required"}], "ok": bool}, pretty-printed.
void write_json_report(std::ostream& out, const std::vector<CheckResult>& checks);

}  // namespace genesis::doctor
