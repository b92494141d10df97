// The environment-contract check (DESIGN.md, "Environment contract"): the torchrun variables and
// genesis's own GENESIS_* ones must be numbers where numbers are meant and agree with each other,
// or init_process_group fails later with a less helpful message (or ranks wait on each other for
// the whole timeout). Every problem found is named with its values in one detail line. The
// variables, their ranges and the texts of a bad value come from core/env.hpp, the one reader.
#include <map>
#include <string>
#include <vector>

#include "genesis/doctor/doctor.hpp"

namespace genesis::doctor {
namespace {

std::string join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : separator) + p;
  return out;
}

}  // namespace

CheckResult check_env_contract(const EnvLookup& lookup) {
  CheckResult r{"env", CheckStatus::ok, "", "", true};
  std::vector<std::string> problems;
  std::map<std::string, long long> value;  // the well-formed numeric variables
  std::map<std::string, std::string> text;  // every contract variable that is set
  for (const env::IntVar& var : env::kContractInts) {
    const std::string name(var.name);
    auto raw = lookup(name);
    if (!raw) continue;
    text[name] = *raw;
    if (auto problem = env::int_problem(var, *raw))
      problems.push_back(*problem);
    else
      value[name] = *env::read_int(var, lookup);
  }
  if (auto raw = lookup(std::string(env::kTimeoutVar))) {
    text[std::string(env::kTimeoutVar)] = *raw;
    if (auto problem = env::timeout_problem(*raw)) problems.push_back(*problem);
  }
  for (std::string_view view : env::kContractTexts) {
    const std::string name(view);
    auto raw = lookup(name);
    if (!raw) continue;
    text[name] = *raw;
    if (raw->empty()) problems.push_back(name + " is set but empty");
  }
  if (text.empty()) {
    r.detail = "not under a launcher";
    return r;
  }
  auto has = [&](const char* name) { return text.count(name) > 0; };
  auto num = [&](const char* name) { return value.count(name) > 0; };
  auto show = [&](const char* name) { return std::string(name) + "=" + text[name]; };

  if (has("RANK") && !has("WORLD_SIZE")) problems.push_back(show("RANK") + " without WORLD_SIZE");
  if (num("WORLD_SIZE") && value["WORLD_SIZE"] > 1 && !has("RANK"))
    problems.push_back(show("WORLD_SIZE") + " without RANK");
  if (num("RANK") && num("WORLD_SIZE") && value["RANK"] >= value["WORLD_SIZE"])
    problems.push_back(show("RANK") + " is not below " + show("WORLD_SIZE"));
  if (num("LOCAL_RANK") && num("LOCAL_WORLD_SIZE") &&
      value["LOCAL_RANK"] >= value["LOCAL_WORLD_SIZE"])
    problems.push_back(show("LOCAL_RANK") + " is not below " + show("LOCAL_WORLD_SIZE"));
  if (num("LOCAL_WORLD_SIZE") && num("WORLD_SIZE") &&
      value["LOCAL_WORLD_SIZE"] > value["WORLD_SIZE"])
    problems.push_back(show("LOCAL_WORLD_SIZE") + " exceeds " + show("WORLD_SIZE"));
  if (num("LOCAL_RANK") && num("RANK") && value["LOCAL_RANK"] > value["RANK"])
    problems.push_back(show("LOCAL_RANK") + " exceeds " + show("RANK"));
  if (num("WORLD_SIZE") && value["WORLD_SIZE"] > 1)
    for (const char* name : {"MASTER_ADDR", "MASTER_PORT"})
      if (!has(name))
        problems.push_back(show("WORLD_SIZE") + " but " + name + " is not set (env:// needs it)");
  if (num("GENESIS_RESTART_COUNT") && num("GENESIS_MAX_RESTARTS") &&
      value["GENESIS_RESTART_COUNT"] > value["GENESIS_MAX_RESTARTS"])
    problems.push_back(show("GENESIS_RESTART_COUNT") + " exceeds " + show("GENESIS_MAX_RESTARTS"));
  if (num("GENESIS_STORE_PORT") && num("MASTER_PORT") &&
      value["GENESIS_STORE_PORT"] == value["MASTER_PORT"])
    problems.push_back(show("GENESIS_STORE_PORT") + " equals MASTER_PORT (the program's rank 0 "
                       "binds MASTER_PORT)");

  if (!problems.empty()) {
    r.status = CheckStatus::fail;
    r.detail = join(problems, "; ");
    r.hint = "these variables come from the launcher: start the job with `genesis launch` "
             "(or torchrun/srun) instead of setting them by hand, or unset RANK, WORLD_SIZE, "
             "LOCAL_RANK and LOCAL_WORLD_SIZE to run one process";
    return r;
  }
  std::vector<std::string> parts;
  if (has("RANK"))
    parts.push_back("rank " + text["RANK"] + " of " + text["WORLD_SIZE"]);
  else if (has("WORLD_SIZE"))
    parts.push_back("world size " + text["WORLD_SIZE"]);
  if (has("LOCAL_RANK"))
    parts.push_back("local rank " + text["LOCAL_RANK"] +
                    (has("LOCAL_WORLD_SIZE") ? " of " + text["LOCAL_WORLD_SIZE"] : ""));
  if (has("GROUP_RANK")) parts.push_back("node " + text["GROUP_RANK"]);
  if (has("MASTER_ADDR") || has("MASTER_PORT"))
    parts.push_back("master " + text["MASTER_ADDR"] + ":" + text["MASTER_PORT"]);
  if (has("GENESIS_STORE_PORT")) parts.push_back("store port " + text["GENESIS_STORE_PORT"]);
  if (has("GENESIS_RESTART_COUNT"))
    parts.push_back("restart " + text["GENESIS_RESTART_COUNT"] + " of " +
                    (has("GENESIS_MAX_RESTARTS") ? text["GENESIS_MAX_RESTARTS"] : "?"));
  if (!has("RANK") && !has("WORLD_SIZE") && !has("LOCAL_RANK"))
    parts.insert(parts.begin(), "not under a launcher");
  r.detail = join(parts, ", ");
  return r;
}

}  // namespace genesis::doctor
