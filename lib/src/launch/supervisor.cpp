// The launcher's main loop. One thread polls every worker's stdout/stderr pipe and reaps exits;
// a failure (non-zero exit or a signal) or a SIGINT/SIGTERM to the launcher starts the teardown:
// SIGTERM to every worker's process group, SIGKILL once the grace period has passed. Restarts
// rerun the whole group with GENESIS_RESTART_COUNT incremented and the same store, as torchrun
// does, so workers namespace their store keys by the restart count.
#include "genesis/launch/supervisor.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <iomanip>
#include <memory>
#include <optional>
#include <sstream>

#include "dist/shm/shm_segment.hpp"
#include "genesis/core/error.hpp"
#include "genesis/core/log.hpp"
#include "genesis/core/unique_fd.hpp"
#include "genesis/launch/child_process.hpp"
#include "genesis/launch/job_identity.hpp"
#include "genesis/launch/output_relay.hpp"
#include "genesis/launch/slurm.hpp"
#include "genesis/core/cpus.hpp"
#include "genesis/launch/worker_env.hpp"
#include "genesis/rendezvous/tcp_store.hpp"
#include "job_monitor.hpp"
#include "launch_signals.hpp"
#include "membership.hpp"

namespace genesis::launch {
namespace {

// Binds `host`:`port` for a moment and returns the port bound (the OS picks one for port 0):
// how the launcher finds a free MASTER_PORT (torchrun's approach) and checks a requested one.
int probe_port(const std::string& host, int port) {
  const UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  GENESIS_CHECK(fd, IoError, "cannot create a socket to check a port");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) addr.sin_addr.s_addr = INADDR_ANY;
  socklen_t len = sizeof addr;
  const bool bound = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  const int error = errno;
  const bool named =
      bound && ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  if (!bound)
    throw IoError("cannot use " + host + ":" + std::to_string(port) + " as MASTER_PORT: " +
                  (error == EADDRINUSE ? std::string("the port is already in use")
                                       : std::string(std::strerror(error))));
  GENESIS_CHECK(named, IoError, "cannot read the port bound on " + host);
  return ntohs(addr.sin_port);
}

// A free port for MASTER_PORT other than the store's own.
int free_port(const std::string& host, int avoid) {
  for (int attempt = 0; attempt < 16; ++attempt)
    if (const int port = probe_port(host, 0); port != avoid) return port;
  throw IoError("cannot find a free port on " + host);
}

using Clock = std::chrono::steady_clock;
constexpr std::size_t kTailLines = 3;
// After the last worker exits, how long pipes held open by its leftovers are still read.
constexpr auto kDrainTime = std::chrono::milliseconds(500);

// Ranks stopped because another one failed need no time to save: they get at most this long.
constexpr double kFailureGraceSeconds = 10;
constexpr double kUnheardNoteSeconds = 10;  // first word of a node that has not joined

Clock::time_point seconds_from_now(double seconds) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

struct Worker {
  int rank = 0;
  int local_rank = 0;
  std::unique_ptr<std::ofstream> log;
  std::deque<std::string> tail;
  std::unique_ptr<OutputRelay> out_relay;
  std::unique_ptr<OutputRelay> err_relay;
  std::optional<ChildProcess> process;
  int stop_signal = 0;  // what the launcher last sent it to stop (SIGTERM, SIGKILL), if anything
};

// How one attempt runs: this node's place in it, and what the launchers watch across hosts.
struct AttemptPlan {
  LaunchOptions layout;  // the job's options, renumbered to the attempt's nodes in an elastic job
  bool spans_hosts = false;  // the job may have several nodes: the launchers watch each other
  int take_in_up_to = 0;     // elastic: the most nodes; a node that comes back is taken in
};

struct AttemptResult {
  std::optional<std::size_t> failed;   // index of the first worker that failed
  std::optional<std::string> remote;   // why another node stopped the job, when it did
  std::optional<std::string> regroup;  // the nodes that came back, when the job restarts for them
  int interrupt_signal = 0;            // SIGINT/SIGTERM the launcher received, 0 when none
  bool final = false;  // a rank here or on another node exited with 2 (usage or config error)
  bool stopped() const { return failed || remote; }
  bool ending() const { return stopped() || regroup || interrupt_signal != 0; }
};

// "rank 3 (local rank 1) exited with code 1", naming the host ("... on host-b exited ...") when
// the job spans hosts, for this launcher and the others.
std::string failure_cause(const LaunchOptions& options, const Worker& w) {
  const ExitStatus& status = *w.process->exit_status();
  return "rank " + std::to_string(w.rank) + " (local rank " + std::to_string(w.local_rank) +
         ")" + (options.nnodes > 1 ? " on " + host_name() : "") + " " +
         (status.signaled ? "was killed by " + status.describe()
                          : "exited with code " + status.describe());
}

bool shown_on_console(const LaunchOptions& options, int local_rank) {
  if (options.local_ranks_filter.empty()) return true;
  for (int shown : options.local_ranks_filter)
    if (shown == local_rank) return true;
  return false;
}

// "[rank N] " ("[host:rank N] " when the job spans hosts), or "" when rank 0 is the only rank
// this console shows.
std::string console_prefix(const LaunchOptions& options, int rank) {
  int shown = 0;
  for (int local = 0; local < options.nproc_per_node; ++local)
    shown += shown_on_console(options, local) ? 1 : 0;
  if (shown == 1 && rank == 0) return "";
  const std::string host = options.nnodes > 1 ? host_name() + ":" : "";
  return "[" + host + "rank " + std::to_string(rank) + "] ";
}

std::filesystem::path effective_log_dir(const LaunchOptions& options, const std::string& run_id) {
  if (!options.log_dir.empty()) return options.log_dir;
  if (options.tee) return std::filesystem::path("genesis-logs") / run_id;
  return {};
}

std::string command_line(const std::vector<std::string>& argv) {
  std::string line;
  for (const auto& word : argv) line += (line.empty() ? "" : " ") + shell_quote(word);
  return line;
}

// Reads what is available on `fd` into `relay`; false at end of stream.
bool pump(int fd, OutputRelay& relay) {
  char buffer[65536];
  const ssize_t n = read(fd, buffer, sizeof buffer);
  if (n > 0) {
    relay.feed(std::string_view(buffer, static_cast<std::size_t>(n)));
    return true;
  }
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  relay.flush();
  return false;
}

// Creates attempt_<k>/ under log_dir (when there is one) and starts this node's workers, each
// with its relays (console prefix, log file, the tail kept for the failure summary).
void start_workers(const LaunchOptions& options, const JobIdentity& job,
                   const std::filesystem::path& log_dir, const LaunchStreams& streams,
                   std::vector<Worker>& workers) {
  const int cores = usable_cores();
  const bool user_set_omp = std::getenv("OMP_NUM_THREADS") != nullptr;
  std::filesystem::path attempt_dir;
  if (!log_dir.empty()) {
    attempt_dir = log_dir / ("attempt_" + std::to_string(job.attempt));
    std::error_code ec;
    std::filesystem::create_directories(attempt_dir, ec);
    GENESIS_CHECK(!ec, IoError, "cannot create log directory " + attempt_dir.string() + ": " + ec.message());
  }
  workers.clear();
  workers.resize(static_cast<std::size_t>(options.nproc_per_node));
  const auto shown_errors = std::make_shared<std::set<std::string>>();
  for (int local = 0; local < options.nproc_per_node; ++local) {
    Worker& w = workers[static_cast<std::size_t>(local)];
    w.local_rank = local;
    w.rank = options.node_rank * options.nproc_per_node + local;
    if (!attempt_dir.empty()) {
      const auto file = attempt_dir / ("rank_" + std::to_string(w.rank) + ".log");
      w.log = std::make_unique<std::ofstream>(file);
      GENESIS_CHECK(w.log->good(), IoError, "cannot write log file " + file.string());
    }
    const bool shown = shown_on_console(options, local);
    const std::string prefix = console_prefix(options, w.rank);
    w.out_relay = std::make_unique<OutputRelay>(prefix, shown ? &streams.out : nullptr,
                                                w.log.get(), &w.tail, kTailLines);
    w.err_relay = std::make_unique<OutputRelay>(prefix, shown ? &streams.err : nullptr,
                                                w.log.get(), &w.tail, kTailLines);
    w.err_relay->share_shown_errors(shown_errors);
    EnvVars env = worker_env(options, job, local, cores, user_set_omp);
    // The relay redraws a shown rank's progress bar in place on the launcher's terminal.
    if (shown && stderr_is_terminal()) env.emplace_back("GENESIS_TERMINAL", "1");
    w.process.emplace(options.command, merged_environment(env));
  }
}

// The workers' open stdout/stderr pipes, for poll(), and whose each one is.
struct Pipes {
  std::vector<pollfd> fds;
  std::vector<std::pair<std::size_t, bool>> owners;  // worker index, is stdout
};

Pipes open_pipes(const std::vector<Worker>& workers) {
  Pipes pipes;
  for (std::size_t i = 0; i < workers.size(); ++i) {
    const ChildProcess& p = *workers[i].process;
    for (const auto& [fd, is_out] : {std::pair{p.stdout_fd(), true}, {p.stderr_fd(), false}}) {
      if (fd < 0) continue;
      pipes.fds.push_back({fd, POLLIN, 0});
      pipes.owners.push_back({i, is_out});
    }
  }
  return pipes;
}

// Waits up to 50 ms for output and relays what came; a pipe at end of stream is closed.
void relay_output(std::vector<Worker>& workers, Pipes& pipes) {
  const int ready = poll(pipes.fds.data(), pipes.fds.size(), 50);
  if (ready <= 0) return;
  for (std::size_t k = 0; k < pipes.fds.size(); ++k) {
    if (pipes.fds[k].revents == 0) continue;
    Worker& w = workers[pipes.owners[k].first];
    const bool is_out = pipes.owners[k].second;
    if (!pump(pipes.fds[k].fd, is_out ? *w.out_relay : *w.err_relay))
      is_out ? w.process->close_stdout() : w.process->close_stderr();
  }
}

bool all_exited(const std::vector<Worker>& workers) {
  return std::all_of(workers.begin(), workers.end(),
                     [](const Worker& w) { return w.process->exit_status().has_value(); });
}

// One attempt once its workers run: their output, the launcher's signals, their exits, news
// from the other nodes' launchers, and the teardown these set off.
class AttemptWatch {
 public:
  AttemptWatch(const AttemptPlan& plan, const JobIdentity& job, const LaunchStreams& streams,
               std::vector<Worker>& workers)
      : options_(plan.layout),
        streams_(streams),
        workers_(workers),
        master_port_(job.master_port),
        next_unheard_note_(
            seconds_from_now(std::min(kUnheardNoteSeconds, options_.heartbeat_timeout_s))) {
    if (plan.spans_hosts) monitor_.emplace(options_, job, plan.take_in_up_to);
  }

  // Until every worker has exited and its pipes are drained (or kDrainTime has passed).
  AttemptResult run() {
    std::optional<Clock::time_point> drain_until;
    while (true) {
      Pipes pipes = open_pipes(workers_);
      if (all_exited(workers_)) {
        if (!drain_until) drain_until = Clock::now() + kDrainTime;
        if (pipes.fds.empty() || Clock::now() >= *drain_until) break;
      }
      relay_output(workers_, pipes);
      take_signals();
      reap_exits();
      hear_other_nodes();
      note_unheard_nodes();
      note_unreached_store();
      if (kill_at_ && !killed_ && Clock::now() >= *kill_at_) {
        for (auto& w : workers_) signal_to_stop(w, SIGKILL);
        killed_ = true;
      }
    }
    for (auto& w : workers_) {
      w.out_relay->flush();
      w.err_relay->flush();
    }
    if (monitor_) monitor_->finish(!result_.ending());
    return result_;
  }

 private:
  // Remembered for the summary, which tells the launcher's signals from others' (the OOM killer).
  static void signal_to_stop(Worker& w, int signal) {
    if (!w.process->exit_status()) w.stop_signal = signal;
    w.process->signal_group(signal);
  }

  // A signal from outside (a scheduler, Ctrl-C) gives the ranks the whole grace period to save
  // and exit; ranks stopped because another failed get at most kFailureGraceSeconds.
  void tear_down(int signal, double grace_s) {
    for (auto& w : workers_) {
      signal_to_stop(w, signal);
      // A stopped rank (SIGSTOP, Ctrl-Z) would hold the signal until the grace period is over.
      w.process->signal_group(SIGCONT);
    }
    if (!kill_at_) kill_at_ = seconds_from_now(grace_s);
  }

  // SIGINT/SIGTERM stop the job; SIGUSR1/SIGUSR2 are passed on to every worker.
  void take_signals() {
    const int stop = LaunchSignals::stop_signal();
    if (stop != 0 && result_.interrupt_signal == 0) {
      result_.interrupt_signal = stop;
      streams_.err << "genesis launch: received " << signal_name(stop)
                   << ", stopping all workers (they have " << options_.grace_period_s
                   << " s, --grace-period, to save and exit; send it again to kill them now)\n"
                   << std::flush;
      tear_down(stop, options_.grace_period_s);
    } else if (LaunchSignals::stop_count() >= 2 && !killed_ && kill_at_ &&
               *kill_at_ > Clock::now()) {
      // Ctrl-C twice: the person at the terminal will not wait out the grace period.
      streams_.err << "genesis launch: received " << signal_name(stop)
                   << " again, killing all workers\n" << std::flush;
      kill_at_ = Clock::now();
    }
    if (const int signal = LaunchSignals::take_forward(); signal != 0) {
      streams_.err << "genesis launch: received " << signal_name(signal)
                   << ", passing it on to every worker\n" << std::flush;
      for (auto& w : workers_) w.process->signal_group(signal);
    }
  }

  // The first worker to fail stops the others (and, through the monitor, the other nodes).
  void reap_exits() {
    for (std::size_t i = 0; i < workers_.size(); ++i) {
      const bool was_running = !workers_[i].process->exit_status().has_value();
      const auto status = workers_[i].process->poll_exit();
      if (!was_running || !status) continue;
      if (!status->success() && !result_.ending()) {
        result_.failed = i;
        // genesis (as argparse and the shell) exits with 2 on a usage or configuration error.
        result_.final = !status->signaled && status->code == kUsageExitCode;
        if (monitor_)
          monitor_->report_failure({failure_cause(options_, workers_[i]), result_.final});
        tear_down(SIGTERM, failure_grace_s_);
      }
    }
  }

  // Another node failed or went away (stop), or a lost node came back (restart to take it in).
  void hear_other_nodes() {
    if (!monitor_ || result_.ending()) return;
    if (auto why = monitor_->remote_failure()) {
      result_.remote = why->cause;
      result_.final = why->final;
      streams_.err << "genesis launch: stopping this node's ranks: " << why->cause << "\n"
                   << std::flush;
      tear_down(SIGTERM, failure_grace_s_);
    } else if (auto back = monitor_->regroup()) {
      // The whole grace period, as for a scheduler's signal: genesis train saves first.
      result_.regroup = *back;
      streams_.err << "genesis launch: " << *back << " came back: stopping this node's ranks "
                   << "(genesis train saves a checkpoint first) to restart the job with it\n"
                   << std::flush;
      tear_down(SIGTERM, options_.grace_period_s);
    }
  }

  // Node 0: a node whose launcher never reached the job's store leaves every rank waiting in its
  // rendezvous, up to --timeout, with nothing on the screen; say which, and where to connect.
  void note_unheard_nodes() {
    if (!monitor_ || options_.node_rank != 0 || result_.ending() ||
        Clock::now() < next_unheard_note_)
      return;
    const std::vector<int> unheard = monitor_->unheard_nodes();
    if (unheard.empty()) return;
    std::string nodes;
    for (int n : unheard) nodes += (nodes.empty() ? "" : ", ") + std::to_string(n);
    streams_.err << "genesis launch: waiting for node" << (unheard.size() > 1 ? "s " : " ")
                 << nodes << " of " << options_.nnodes << ": no launcher of theirs has reached "
                 << "the job's store at " << monitor_->store_where()
                 << "; start `genesis launch --nnodes " << options_.nnodes
                 << " --node-rank N --master-addr " << options_.master_addr << " --master-port "
                 << master_port_ << " ...` there\n"
                 << std::flush;
    next_unheard_note_ = Clock::now() + std::chrono::seconds(60);
  }

  // Other nodes: a node started before node 0 (or told the wrong address) waits for its store,
  // and its ranks with it, up to their timeout; say so, and what node 0 must run.
  void note_unreached_store() {
    if (!monitor_ || options_.node_rank == 0 || result_.ending() ||
        Clock::now() < next_unheard_note_)
      return;
    const std::optional<std::string> why = monitor_->unreached_store();
    if (!why) return;
    streams_.err << "genesis launch: node " << options_.node_rank << " of " << options_.nnodes
                 << " is waiting for node 0: the job's store at " << monitor_->store_where()
                 << " does not answer (" << *why << "); start `genesis launch --nnodes "
                 << options_.nnodes << " --node-rank 0 --master-addr " << options_.master_addr
                 << " --master-port " << master_port_ << " ...` on that host\n"
                 << std::flush;
    next_unheard_note_ = Clock::now() + std::chrono::seconds(60);
  }

  const LaunchOptions& options_;
  const LaunchStreams& streams_;
  std::vector<Worker>& workers_;
  const int master_port_;
  Clock::time_point next_unheard_note_;  // when to say again which nodes are missing
  const double failure_grace_s_ = std::min(options_.grace_period_s, kFailureGraceSeconds);
  std::optional<JobMonitor> monitor_;  // the other nodes' launchers, across hosts
  AttemptResult result_;
  std::optional<Clock::time_point> kill_at_;
  bool killed_ = false;
};

AttemptResult run_attempt(const AttemptPlan& plan, const JobIdentity& job,
                          const std::filesystem::path& log_dir, const LaunchStreams& streams,
                          std::vector<Worker>& workers) {
  start_workers(plan.layout, job, log_dir, streams, workers);
  AttemptResult result = AttemptWatch(plan, job, streams, workers).run();
  // A worker killed while its shm group's ranks joined leaves the segment's name behind.
  for (const Worker& w : workers)
    if (w.process) dist::shm::remove_segments_of(w.process->pid());
  return result;
}

// A rank that timed out in a collective only noticed the hang; its error names the ranks that
// never arrived ("ranks that never arrived: 2, 3"), which are where the hang is.
std::optional<std::string> hung_ranks(const std::vector<Worker>& workers) {
  static const std::string kMarker = "ranks that never arrived: ";
  for (const Worker& w : workers)
    for (const std::string& line : w.tail)
      if (const auto at = line.find(kMarker); at != std::string::npos)
        return "the hang is on rank(s) " + line.substr(at + kMarker.size()) + " (rank " +
               std::to_string(w.rank) + " timed out waiting for them)";
  return std::nullopt;
}

void print_summary(const LaunchOptions& options, const std::vector<Worker>& workers,
                   const AttemptResult& result, int restart_count, std::ostream& err) {
  const std::string cause = result.failed ? failure_cause(options, workers[*result.failed])
                                          : "another node stopped the job: " + *result.remote;
  err << "genesis launch: " << cause << " (attempt " << restart_count + 1 << " of "
      << options.max_restarts + 1 << ")\n";
  if (auto hung = hung_ranks(workers)) err << "genesis launch: " << *hung << "\n";
  const std::string host = host_name();
  err << "  " << std::left << std::setw(6) << "RANK" << std::setw(7) << "LOCAL" << std::setw(20)
      << "HOST" << "EXIT\n";
  // A mistake every rank makes (a bad config) ends every rank's output with the same lines:
  // they are shown once, under the first rank that printed them.
  std::vector<const Worker*> shown;
  for (const Worker& w : workers) {
    const auto& s = w.process->exit_status();
    const bool launchers = s && s->signaled && s->signal == w.stop_signal;
    err << "  " << std::left << std::setw(6) << w.rank << std::setw(7) << w.local_rank
        << std::setw(20) << host << (s ? s->describe() : "?")
        << (launchers ? " (sent by the launcher)" : "") << "\n";
    if (w.tail.empty()) continue;
    const auto same = std::find_if(shown.begin(), shown.end(),
                                   [&](const Worker* earlier) { return earlier->tail == w.tail; });
    if (same != shown.end()) {
      err << "      | (the same last lines as rank " << (*same)->rank << ")\n";
      continue;
    }
    for (const auto& line : w.tail) err << "      | " << line << "\n";
    shown.push_back(&w);
  }
  err << std::flush;
}

// How the next attempt runs: as the job's options say, or in an elastic job on the nodes
// admitted to it, renumbered 0..n-1 (this node's ranks follow its place). A node the job runs
// without waits here until an attempt takes it in (job.attempt moves on to that one).
AttemptPlan attempt_plan(const LaunchOptions& options, JobIdentity& job, std::ostream& err) {
  AttemptPlan plan{options, options.nnodes > 1, 0};
  if (options.min_nnodes == 0 || options.nnodes == 1) return plan;
  const Membership members = form_membership(options, job, err);
  plan.layout.nnodes = static_cast<int>(members.nodes.size());
  plan.layout.node_rank = members.index;
  plan.take_in_up_to = options.nnodes;
  if (plan.layout.nnodes != options.nnodes || job.attempt > 0)
    err << "genesis launch: attempt " << job.attempt + 1 << " runs on " << plan.layout.nnodes
        << " of " << options.nnodes << " nodes: " << plan.layout.nnodes * options.nproc_per_node
        << " ranks; this node is node " << plan.layout.node_rank << "\n" << std::flush;
  return plan;
}

bool all_succeeded(const std::vector<Worker>& workers) {
  return std::all_of(workers.begin(), workers.end(),
                     [](const Worker& w) { return w.process->exit_status()->success(); });
}

}  // namespace

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

int run_launch(const LaunchOptions& options, const LaunchStreams& streams) {
  validate_launch_options(options);
  if (options.dry_run) {
    print_dry_run(options, streams.out);
    return 0;
  }
  JobIdentity job;
  job.run_id = resolved_run_id(options);
  const StoreToken token = resolved_store_token(options, job.run_id);
  job.store_token = token.value;
  if (token.origin == TokenOrigin::derived)
    streams.err << "genesis launch: store token derived from the job's address, port and run id "
                   "(the same on every node; pass --store-token or GENESIS_STORE_TOKEN for a "
                   "secret one)\n";
  job.master_port = resolved_master_port(options);
  // Node 0 hosts genesis's rendezvous store on its own port, so MASTER_PORT stays free for a
  // program whose rank 0 binds it (PyTorch does). Across nodes every launcher must agree on the
  // store's port without talking first: MASTER_PORT + 1. On one node the OS picks both.
  job.store_port = options.nnodes > 1 ? job.master_port + 1 : 0;
  std::optional<rendezvous::TCPStoreServer> server;
  if (options.node_rank == 0)
    server.emplace(
        rendezvous::TCPStoreServerOptions{options.master_addr, job.store_port, job.store_token});
  if (server) job.store_port = server->port();
  if (job.master_port == 0)
    job.master_port = free_port(options.master_addr, job.store_port);
  else if (options.node_rank == 0)  // it must be free for the program's rank 0 to bind
    probe_port(options.master_addr, job.master_port);

  const auto log_dir = effective_log_dir(options, job.run_id);
  if (!log_dir.empty())
    streams.err << "genesis launch: writing each rank's output under " << log_dir.string() << "\n";
  LaunchSignals signals;
  std::vector<Worker> workers;
  for (;; ++job.attempt) {
    const AttemptPlan plan = attempt_plan(options, job, streams.err);
    const AttemptResult result = run_attempt(plan, job, log_dir, streams, workers);
    if (result.interrupt_signal != 0) return 128 + result.interrupt_signal;
    if (!result.stopped() && (!result.regroup || all_succeeded(workers))) return 0;
    if (!result.stopped()) {  // torchrun's rule too: a change of membership is not a restart
      streams.err << "genesis launch: restarting all " << options.nproc_per_node
                  << " local ranks to take in " << *result.regroup
                  << " (not counted against --max-restarts)\n" << std::flush;
      continue;
    }
    print_summary(plan.layout, workers, result, job.restart_count, streams.err);
    const int code =
        result.failed ? workers[*result.failed].process->exit_status()->shell_code() : 1;
    if (job.restart_count >= options.max_restarts) return code == 0 ? 1 : code;
    if (result.final) {
      streams.err << "genesis launch: not restarting: a rank exited with code 2, a usage or "
                     "configuration error that every restart would repeat\n";
      return code == 0 ? 1 : code;
    }
    ++job.restart_count;
    streams.err << "genesis launch: restarting all " << options.nproc_per_node
                << " local ranks (restart " << job.restart_count << " of "
                << options.max_restarts << ")\n" << std::flush;
  }
}

void print_dry_run(const LaunchOptions& options, std::ostream& out) {
  validate_launch_options(options);
  JobIdentity job;
  job.run_id = resolved_run_id(options);
  job.master_port = resolved_master_port(options);
  job.store_port = options.nnodes > 1 ? job.master_port + 1 : 0;
  const int cores = usable_cores();
  const bool user_set_omp = std::getenv("OMP_NUM_THREADS") != nullptr;
  // A derived token is no secret (every node computes it); a given one stays unprinted.
  const StoreToken token = resolved_store_token(options, job.run_id);
  const std::string shown_token = token.origin == TokenOrigin::derived ? token.value
                                  : token.origin == TokenOrigin::given ? "<given>"
                                                                       : "<random per job>";
  for (int local = 0; local < options.nproc_per_node; ++local) {
    const int rank = options.node_rank * options.nproc_per_node + local;
    out << "rank " << rank << " (local rank " << local << ", node " << options.node_rank
        << "): " << command_line(options.command) << "\n";
    for (const auto& [name, value] : worker_env(options, job, local, cores, user_set_omp)) {
      std::string shown = value;
      if (name == "GENESIS_STORE_TOKEN") shown = shown_token;
      if ((name == "MASTER_PORT" && job.master_port == 0) ||
          (name == "GENESIS_STORE_PORT" && job.store_port == 0))
        shown = "<free port picked at launch>";
      out << "  " << name << "=" << shown << "\n";
    }
  }
}

}  // namespace genesis::launch
