// A real SLURM cluster on this one machine, for tests that run genesis under srun and sbatch:
// munged, slurmctld and one slurmd per node, configured entirely in a temporary directory on free
// ports, so they never meet a system SLURM. Needs root and Debian's slurmctld, slurmd,
// slurm-client and munge (`make test` installs them); start() says why when SLURM cannot come up,
// and the destructor ends every process the cluster ran (daemons, steps, tasks) before it returns.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/cli_run.hpp"

namespace genesis::testing {

class LocalSlurm {
 public:
  using Env = std::vector<std::pair<std::string, std::optional<std::string>>>;

  // nodes == 1: one node named after this host, so a step's node list is a plain host name.
  // nodes == 2: nodes "127.0.0.1" and "127.0.0.2", a slurmd each on this machine, so the job's
  // node list is the bracketed "127.0.0.[1-2]" and every node name is an address no resolver is
  // asked about. Each node has 2 CPUs whatever the machine has (SlurmdParameters=config_overrides).
  // nullptr, with `why_not` set, where SLURM cannot run or did not come up within 20 s.
  static std::unique_ptr<LocalSlurm> start(int nodes, std::string& why_not) {
    if (::geteuid() != 0) {
      why_not = "a local SLURM needs root (slurmd runs every job's tasks as their user)";
      return nullptr;
    }
    std::unique_ptr<LocalSlurm> slurm(new LocalSlurm());
    for (const char* name : {"munged", "slurmctld", "slurmd", "srun", "sbatch", "scontrol", "sinfo"})
      if (find_program(name).empty()) {
        why_not = std::string(name) + " is not installed (Debian: slurmctld slurmd slurm-client "
                  "munge; `make deps` installs them)";
        return nullptr;
      }
    try {
      slurm->configure(nodes);
      slurm->launch_daemons();
    } catch (const std::exception& e) {
      why_not = std::string("cannot start a local SLURM: ") + e.what();
      return nullptr;
    }
    if (!slurm->wait_until_idle(std::chrono::seconds(20), why_not)) {
      why_not += "\n" + slurm->log_tail();
      return nullptr;  // the destructor stops whatever did start
    }
    return slurm;
  }

  LocalSlurm(const LocalSlurm&) = delete;
  LocalSlurm& operator=(const LocalSlurm&) = delete;

  // Ends every process of this cluster, including steps and tasks that slurmd's slurmstepd
  // started outside our process tree: they all carry this cluster's SLURM_CONF in their
  // environment, which no other process on the machine can have (the path is our temp dir).
  ~LocalSlurm() {
    for (int round = 0; round < 20 && kill_marked_processes() > 0; ++round)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (pid_t pid : daemons_) {
      ::kill(pid, SIGKILL);
      int status = 0;
      ::waitpid(pid, &status, 0);
    }
  }

  const std::filesystem::path& dir() const { return dir_.path(); }
  const std::string& node_list() const { return node_list_; }
  const std::string& conf() const { return conf_; }

  // The environment a client of this cluster needs: its SLURM_CONF, and none of the SLURM or
  // launcher variables the test itself may have inherited (from a CI job under SLURM, say), which
  // would otherwise leak into the tasks. `extra` comes last and wins.
  Env client_env(const Env& extra = {}) const {
    Env env = {{"SLURM_CONF", conf_}, {"OMP_NUM_THREADS", "1"}};
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string name = std::string(*e).substr(0, std::string(*e).find('='));
      for (const char* prefix : {"SLURM_", "SBATCH_", "SRUN_", "SALLOC_"})
        if (name.rfind(prefix, 0) == 0 && name != "SLURM_CONF") env.emplace_back(name, std::nullopt);
    }
    for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                             "MASTER_ADDR", "MASTER_PORT", "GENESIS_STORE_PORT",
                             "GENESIS_STORE_TOKEN", "GENESIS_RUN_ID"})
      env.emplace_back(name, std::nullopt);
    for (const auto& change : extra) {
      std::erase_if(env, [&](const auto& e) { return e.first == change.first; });
      env.push_back(change);
    }
    return env;
  }

  // Runs argv (srun, sbatch, genesis, ...) against this cluster, killed after `timeout_s` so a
  // hung step fails the test instead of hanging it.
  CliResult run(const std::vector<std::string>& argv, const Env& extra = {},
                const std::filesystem::path& cwd = {}, int timeout_s = 50) const {
    std::vector<std::string> command = {"timeout", "--kill-after=5", std::to_string(timeout_s)};
    command.insert(command.end(), argv.begin(), argv.end());
    return run_process(command, {client_env(extra), cwd});
  }

  // Waits until batch job `id` has ended; its last `scontrol show job` record (JobState=...
  // ExitCode=...), or "" when `timeout_s` passed first.
  std::string wait_for_job(const std::string& id, int timeout_s) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    while (std::chrono::steady_clock::now() < deadline) {
      const CliResult r = run({"scontrol", "-o", "show", "job", id}, {}, {}, 10);
      const std::string state = field_of(r.out, "JobState");
      if (!state.empty() && state != "PENDING" && state != "RUNNING" && state != "CONFIGURING" &&
          state != "COMPLETING" && state != "SUSPENDED")
        return r.out;
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    return "";
  }

  // The value of NAME=VALUE in a one-line `scontrol -o` record ("" when absent).
  static std::string field_of(const std::string& record, const std::string& name) {
    std::istringstream words(record);
    for (std::string word; words >> word;)
      if (word.rfind(name + "=", 0) == 0) return word.substr(name.size() + 1);
    return "";
  }

  // The last lines of every daemon's log, for a message that says why something did not work.
  std::string log_tail(std::size_t lines = 12) const {
    std::string text;
    for (const auto& name : log_names_) {
      std::ifstream in(dir() / name);
      std::deque<std::string> last;
      for (std::string line; std::getline(in, line);) {
        last.push_back(line);
        if (last.size() > lines) last.pop_front();
      }
      text += "--- " + name + " (last " + std::to_string(last.size()) + " lines) ---\n";
      for (const auto& line : last) text += line + "\n";
    }
    return text;
  }

  static bool bindable(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    const bool ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    if (fd >= 0) ::close(fd);
    return ok;
  }

  // Free TCP ports, all held open until every one is chosen so no two are the same.
  static std::vector<int> free_ports(int count) {
    std::vector<int> fds, ports;
    for (int i = 0; i < count; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      socklen_t len = sizeof addr;
      if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
          ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
        throw std::runtime_error("cannot find a free port");
      fds.push_back(fd);
      ports.push_back(ntohs(addr.sin_port));
    }
    for (int fd : fds) ::close(fd);
    return ports;
  }

  // A MASTER_PORT for several nodes: genesis's store listens on PORT+1, so both must be free.
  // Taken below the kernel's ephemeral range (32768 and up by default), where no outgoing
  // connection of a concurrent test can be handed PORT+1 between this check and the bind.
  static int free_port_pair() {
    std::mt19937 pick(std::random_device{}());
    for (int attempt = 0; attempt < 200; ++attempt) {
      const int port = std::uniform_int_distribution<int>(20000, 32000)(pick);
      if (bindable(port) && bindable(port + 1)) return port;
    }
    throw std::runtime_error("cannot find two free ports in a row");
  }

 private:
  LocalSlurm() = default;

  // `name` on PATH or in the sbin directories a non-login root shell may lack; "" when absent.
  static std::string find_program(const std::string& name) {
    std::string dirs = std::getenv("PATH") ? std::getenv("PATH") : "";
    dirs += ":/usr/sbin:/sbin:/usr/bin:/bin";
    std::stringstream list(dirs);
    for (std::string d; std::getline(list, d, ':');)
      if (!d.empty() && ::access((d + "/" + name).c_str(), X_OK) == 0) return d + "/" + name;
    return "";
  }

  static std::string short_hostname() {
    char name[256] = {};
    ::gethostname(name, sizeof name - 1);
    std::string host(name);
    return host.substr(0, host.find('.'));
  }

  void configure(int nodes) {
    const std::filesystem::path d = dir();
    conf_ = (d / "slurm.conf").string();
    // munged wants its key readable by its owner only.
    std::random_device random;
    {
      std::string key(1024, '\0');
      for (char& byte : key) byte = static_cast<char>(random());
      std::ofstream(d / "munge.key", std::ios::binary) << key;
      std::filesystem::permissions(d / "munge.key", std::filesystem::perms::owner_read);
    }
    const std::string host = short_hostname();
    const std::vector<int> ports = free_ports(1 + nodes);
    std::ostringstream c;
    c << "ClusterName=genesistest\n"
      << "SlurmctldHost=" << host << "(127.0.0.1)\n"
      << "SlurmctldPort=" << ports[0] << "\n"
      << "AuthType=auth/munge\nCredType=cred/munge\n"
      << "AuthInfo=socket=" << (d / "munge.sock").string() << "\n"
      << "SlurmUser=root\nSlurmdUser=root\n"
      << "StateSaveLocation=" << (d / "state").string() << "\n"
      << "SlurmdSpoolDir=" << (d / "spool" / "%n").string() << "\n"
      << "SlurmctldPidFile=" << (d / "slurmctld.pid").string() << "\n"
      << "SlurmdPidFile=" << (d / "slurmd-%n.pid").string() << "\n"
      << "MailProg=/bin/true\n"
      << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
      << "SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\n"
      << "MpiDefault=none\nJobAcctGatherType=jobacct_gather/none\n"
      << "AccountingStorageType=accounting_storage/none\nJobCompType=jobcomp/none\n"
      << "ReturnToService=2\nSlurmdParameters=config_overrides\n"
      // A cancelled or timed-out task gets SIGKILL 2 s after SIGTERM instead of 30 s.
      << "KillWait=2\n"
      // Job ids of their own: tasks derive their port and token from the job id, and ctest -j
      // runs several of these clusters at once, which would otherwise all start at job 1.
      << "FirstJobId=" << std::uniform_int_distribution<int>(1000, 50'000'000)(random) << "\n";
    std::filesystem::create_directories(d / "state");
    if (nodes == 1) {
      // Ranks connect to the node's name as rank 0's host; a machine whose own name does not
      // resolve gets a node named by its address instead, still a list with nothing to expand.
      addrinfo* found = nullptr;
      const bool resolves = ::getaddrinfo(host.c_str(), nullptr, nullptr, &found) == 0;
      if (found != nullptr) ::freeaddrinfo(found);
      node_names_ = {resolves ? host : "127.0.0.1"};
      node_list_ = node_names_.front();
    } else {
      for (int n = 1; n <= nodes; ++n) node_names_.push_back("127.0.0." + std::to_string(n));
      node_list_ = "127.0.0.[1-" + std::to_string(nodes) + "]";
    }
    for (std::size_t n = 0; n < node_names_.size(); ++n) {
      const std::string& name = node_names_[n];
      c << "NodeName=" << name << " NodeHostname=" << host
        << " NodeAddr=" << (nodes == 1 ? "127.0.0.1" : name) << " Port=" << ports[1 + n]
        << " CPUs=2 RealMemory=1000 State=UNKNOWN\n";
      std::filesystem::create_directories(d / "spool" / name);
    }
    c << "PartitionName=test Nodes=" << node_list_
      << " Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES\n";
    std::ofstream(conf_) << c.str();
  }

  // Starts a daemon in the foreground as our child, its output in dir()/log. It dies with the
  // test process (PR_SET_PDEATHSIG), so even a crashed test leaves no daemon behind.
  void spawn(const std::vector<std::string>& argv, const std::string& log) {
    std::vector<std::string> env_strings = child_environment(client_env());
    std::vector<char*> envp, args;
    for (auto& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<std::string> argv_copy = argv;
    for (auto& a : argv_copy) args.push_back(a.data());
    args.push_back(nullptr);
    const int out = ::open((dir() / log).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (out < 0 || null < 0) throw std::runtime_error("cannot open " + (dir() / log).string());
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) _exit(126);
      ::dup2(null, STDIN_FILENO);
      ::dup2(out, STDOUT_FILENO);
      ::dup2(out, STDERR_FILENO);
      ::execve(args[0], args.data(), envp.data());
      _exit(127);
    }
    ::close(out);
    ::close(null);
    daemons_.push_back(pid);
    log_names_.push_back(log);
  }

  void launch_daemons() {
    const std::filesystem::path d = dir();
    spawn({find_program("munged"), "--foreground", "--force",
           "--key-file=" + (d / "munge.key").string(), "--socket=" + (d / "munge.sock").string(),
           "--pid-file=" + (d / "munged.pid").string(), "--seed-file=" + (d / "munged.seed").string()},
          "munged.log");
    // slurmctld and slurmd talk through munge from their first message on.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!std::filesystem::exists(d / "munge.sock") && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    spawn({find_program("slurmctld"), "-D", "-f", conf_}, "slurmctld.log");
    for (const auto& name : node_names_)
      spawn({find_program("slurmd"), "-D", "-f", conf_, "-N", name}, "slurmd-" + name + ".log");
  }

  // True once sinfo shows every node idle; false with `why_not` when a daemon exited or the time ran out.
  bool wait_until_idle(std::chrono::seconds limit, std::string& why_not) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    std::string last;
    while (std::chrono::steady_clock::now() < deadline) {
      for (std::size_t i = 0; i < daemons_.size(); ++i) {
        int status = 0;
        if (::waitpid(daemons_[i], &status, WNOHANG) == daemons_[i]) {
          daemons_.erase(daemons_.begin() + static_cast<long>(i));
          why_not = log_names_[i].substr(0, log_names_[i].find(".log")) +
                    " exited as it started (its log is below)";
          return false;
        }
      }
      const CliResult r = run({"sinfo", "-h", "-N", "-o", "%N %t"}, {}, {}, 10);
      last = r.out + r.err;
      std::size_t idle = 0;
      for (const auto& line : lines_of(r.out)) idle += line.ends_with(" idle") ? 1 : 0;
      if (r.exit_code == 0 && idle == node_names_.size()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    why_not = "SLURM's nodes were not idle within " + std::to_string(limit.count()) +
              " s; sinfo said: " + last;
    return false;
  }

  // SIGKILLs every process whose environment holds this cluster's SLURM_CONF (never this one);
  // how many it found.
  int kill_marked_processes() const {
    const std::string marker = "SLURM_CONF=" + conf_;
    int found = 0;
    DIR* proc = ::opendir("/proc");
    if (proc == nullptr) return 0;
    while (dirent* entry = ::readdir(proc)) {
      const pid_t pid = static_cast<pid_t>(std::atoi(entry->d_name));
      if (pid <= 0 || pid == ::getpid()) continue;
      std::ifstream in(std::string("/proc/") + entry->d_name + "/environ", std::ios::binary);
      for (std::string var; std::getline(in, var, '\0');)
        if (var == marker) {
          ::kill(pid, SIGKILL);
          ++found;
          break;
        }
    }
    ::closedir(proc);
    return found;
  }

  TempDir dir_;
  std::string conf_;
  std::vector<std::string> node_names_;
  std::string node_list_;
  std::vector<pid_t> daemons_;
  std::vector<std::string> log_names_;
};

}  // namespace genesis::testing
