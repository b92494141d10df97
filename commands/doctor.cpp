// `genesis doctor`: run the local checks (and with --comm the job-wide communication test), then
// print the table or --json on rank 0; other ranks of a launched job log only their warn/FAIL
// lines, so a healthy job's output stays one report. Exit 1 when a required check failed. The
// checks themselves live in lib/src/doctor/.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include <spdlog/spdlog.h>

#include "commands/command_table.hpp"
#include "genesis/core/env.hpp"
#include "genesis/core/error.hpp"
#include "genesis/doctor/comm_check.hpp"
#include "genesis/doctor/doctor.hpp"
#include "genesis/doctor/report.hpp"

namespace genesis::commands {
namespace {

struct DoctorFlags {
  bool json = false;
  bool comm = false;
  std::string backend = "auto";
  double timeout_s = 60;
  CLI::Option* color = nullptr;  // the root's --color, read after parsing
};

void add_doctor_flags(CLI::App& app, DoctorFlags& flags) {
  app.add_flag("--json", flags.json,
               "Print the report as one JSON object: the checks (name, status, detail, hint, "
               "required) and ok");
  app.add_flag("--comm", flags.comm,
               "Also run all_reduce, broadcast, all_gather and barrier across the job's ranks, "
               "checking and timing each (run it under genesis launch)");
  app.add_option("--backend", flags.backend,
                 "Process group for --comm; auto is shm+gloo, what CPU training uses: shared "
                 "memory within each host, gloo across (nccl needs a GPU per rank)")
      ->type_name("NAME")
      ->check(CLI::IsMember({"auto", "gloo", "nccl", "shm", "shm+gloo"}))
      ->capture_default_str();
  app.add_option("--timeout", flags.timeout_s,
                 "Seconds --comm waits for the other ranks and for each collective")
      ->type_name("SECONDS")
      ->capture_default_str();
  if (CLI::App* root = app.get_parent(); root != nullptr)
    flags.color = root->get_option_no_throw("--color");
}

// The table's colours follow --color, judged against stdout (where the table goes).
bool stdout_color(const DoctorFlags& flags) {
  const std::string mode =
      flags.color != nullptr && flags.color->count() > 0 ? flags.color->as<std::string>() : "auto";
  if (mode == "always") return true;
  if (mode == "never") return false;
  const char* no_color = std::getenv("NO_COLOR");
  return ::isatty(STDOUT_FILENO) == 1 && (no_color == nullptr || *no_color == '\0');
}

int run_doctor(const DoctorFlags& flags, const RunContext& context) {
  GENESIS_CHECK(flags.timeout_s > 0, InvalidArgument,
                "--timeout must be positive, got " + std::to_string(flags.timeout_s));
  const doctor::EnvLookup env = env::process_lookup();
  int rank = doctor::job_position(env).rank;
  std::vector<doctor::CheckResult> checks = doctor::run_local_checks({});
  if (flags.comm) {
    doctor::CommOptions options;
    options.backend = flags.backend;
    options.timeout = std::chrono::milliseconds(static_cast<long long>(flags.timeout_s * 1000));
    auto outcome = doctor::run_job_comm_checks(options, !doctor::all_passed(checks), env);
    rank = outcome.rank;
    for (auto& c : outcome.checks) checks.push_back(std::move(c));
  }
  // A rank number from a broken environment means nothing: such a process reports in full.
  const bool env_broken = std::any_of(checks.begin(), checks.end(), [](const auto& c) {
    return c.name == "env" && c.status == doctor::CheckStatus::fail;
  });
  if (rank == 0 || env_broken) {
    if (flags.json)
      doctor::write_json_report(context.out, checks);
    else
      doctor::write_text_report(context.out, checks, stdout_color(flags));
  } else {
    for (const auto& c : checks) {
      if (c.status == doctor::CheckStatus::ok) continue;
      const auto level = c.status == doctor::CheckStatus::fail ? spdlog::level::err
                                                                 : spdlog::level::warn;
      spdlog::log(level, "doctor: {} {}: {}{}", doctor::status_label(c.status), c.name, c.detail,
                  c.hint.empty() ? "" : " (hint: " + c.hint + ")");
    }
  }
  return doctor::all_passed(checks) ? 0 : 1;
}

}  // namespace

Command make_doctor_command() {
  auto flags = std::make_shared<DoctorFlags>();
  return {"doctor",
          "Check the build, CPUs, GPUs, NCCL, env vars, ports and /dev/shm, with a fix for each",
          [flags](CLI::App& app) { add_doctor_flags(app, *flags); },
          [flags](const RunContext& context) { return run_doctor(*flags, context); }};
}

}  // namespace genesis::commands
