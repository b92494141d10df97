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

namespace {

// The contract variables that are set: every one as text, the well-formed numbers as values.
struct ContractVars {
  std::map<std::string, long long> value;
  std::map<std::string, std::string> text;
  std::vector<std::string> problems;  // each malformed variable

  bool has(const char* name) const { return text.count(name) > 0; }
  bool num(const char* name) const { return value.count(name) > 0; }
  long long at(const char* name) const { return value.at(name); }
  std::string show(const char* name) const { return std::string(name) + "=" + text.at(name); }
  std::string get(const char* name) const { return has(name) ? text.at(name) : ""; }
};

ContractVars read_contract(const EnvLookup& lookup) {
  ContractVars v;
  for (const env::IntVar& var : env::kContractInts) {
    const std::string name(var.name);
    auto raw = lookup(name);
    if (!raw) continue;
    v.text[name] = *raw;
    if (auto problem = env::int_problem(var, *raw))
      v.problems.push_back(*problem);
    else
      v.value[name] = *env::read_int(var, lookup);
  }
  if (auto raw = lookup(std::string(env::kTimeoutVar))) {
    v.text[std::string(env::kTimeoutVar)] = *raw;
    if (auto problem = env::timeout_problem(*raw)) v.problems.push_back(*problem);
  }
  for (std::string_view view : env::kContractTexts) {
    const std::string name(view);
    auto raw = lookup(name);
    if (!raw) continue;
    v.text[name] = *raw;
    if (raw->empty()) v.problems.push_back(name + " is set but empty");
  }
  return v;
}

// Variables that are each well formed but contradict one another.
void check_relations(ContractVars& v) {
  std::vector<std::string>& p = v.problems;
  if (v.has("RANK") && !v.has("WORLD_SIZE")) p.push_back(v.show("RANK") + " without WORLD_SIZE");
  if (v.num("WORLD_SIZE") && v.at("WORLD_SIZE") > 1 && !v.has("RANK"))
    p.push_back(v.show("WORLD_SIZE") + " without RANK");
  if (v.num("RANK") && v.num("WORLD_SIZE") && v.at("RANK") >= v.at("WORLD_SIZE"))
    p.push_back(v.show("RANK") + " is not below " + v.show("WORLD_SIZE"));
  if (v.num("LOCAL_RANK") && v.num("LOCAL_WORLD_SIZE") &&
      v.at("LOCAL_RANK") >= v.at("LOCAL_WORLD_SIZE"))
    p.push_back(v.show("LOCAL_RANK") + " is not below " + v.show("LOCAL_WORLD_SIZE"));
  if (v.num("LOCAL_WORLD_SIZE") && v.num("WORLD_SIZE") &&
      v.at("LOCAL_WORLD_SIZE") > v.at("WORLD_SIZE"))
    p.push_back(v.show("LOCAL_WORLD_SIZE") + " exceeds " + v.show("WORLD_SIZE"));
  if (v.num("LOCAL_RANK") && v.num("RANK") && v.at("LOCAL_RANK") > v.at("RANK"))
    p.push_back(v.show("LOCAL_RANK") + " exceeds " + v.show("RANK"));
  if (v.num("WORLD_SIZE") && v.at("WORLD_SIZE") > 1)
    for (const char* name : {"MASTER_ADDR", "MASTER_PORT"})
      if (!v.has(name))
        p.push_back(v.show("WORLD_SIZE") + " but " + name + " is not set (env:// needs it)");
  if (v.num("GENESIS_RESTART_COUNT") && v.num("GENESIS_MAX_RESTARTS") &&
      v.at("GENESIS_RESTART_COUNT") > v.at("GENESIS_MAX_RESTARTS"))
    p.push_back(v.show("GENESIS_RESTART_COUNT") + " exceeds " + v.show("GENESIS_MAX_RESTARTS"));
  if (v.num("GENESIS_STORE_PORT") && v.num("MASTER_PORT") &&
      v.at("GENESIS_STORE_PORT") == v.at("MASTER_PORT"))
    p.push_back(v.show("GENESIS_STORE_PORT") + " equals MASTER_PORT (the program's rank 0 "
                "binds MASTER_PORT)");
}

// "rank 1 of 2, local rank 1 of 2, master 127.0.0.1:29500, ...".
std::string describe(const ContractVars& v) {
  std::vector<std::string> parts;
  if (v.has("RANK"))
    parts.push_back("rank " + v.get("RANK") + " of " + v.get("WORLD_SIZE"));
  else if (v.has("WORLD_SIZE"))
    parts.push_back("world size " + v.get("WORLD_SIZE"));
  if (v.has("LOCAL_RANK"))
    parts.push_back("local rank " + v.get("LOCAL_RANK") +
                    (v.has("LOCAL_WORLD_SIZE") ? " of " + v.get("LOCAL_WORLD_SIZE") : ""));
  if (v.has("GROUP_RANK")) parts.push_back("node " + v.get("GROUP_RANK"));
  if (v.has("MASTER_ADDR") || v.has("MASTER_PORT"))
    parts.push_back("master " + v.get("MASTER_ADDR") + ":" + v.get("MASTER_PORT"));
  if (v.has("GENESIS_STORE_PORT")) parts.push_back("store port " + v.get("GENESIS_STORE_PORT"));
  if (v.has("GENESIS_RESTART_COUNT"))
    parts.push_back("restart " + v.get("GENESIS_RESTART_COUNT") + " of " +
                    (v.has("GENESIS_MAX_RESTARTS") ? v.get("GENESIS_MAX_RESTARTS") : "?"));
  if (!v.has("RANK") && !v.has("WORLD_SIZE") && !v.has("LOCAL_RANK"))
    parts.insert(parts.begin(), "not under a launcher");
  return join(parts, ", ");
}

}  // namespace

CheckResult check_env_contract(const EnvLookup& lookup) {
  CheckResult r{"env", CheckStatus::ok, "", "", true};
  ContractVars vars = read_contract(lookup);
  if (vars.text.empty()) {
    r.detail = "not under a launcher";
    return r;
  }
  check_relations(vars);
  if (!vars.problems.empty()) {
    r.status = CheckStatus::fail;
    r.detail = join(vars.problems, "; ");
    r.hint = "these variables come from the launcher: start the job with `genesis launch` "
             "(or torchrun/srun) instead of setting them by hand, or unset RANK, WORLD_SIZE, "
             "LOCAL_RANK and LOCAL_WORLD_SIZE to run one process";
    return r;
  }
  r.detail = describe(vars);
  return r;
}

}  // namespace genesis::doctor
