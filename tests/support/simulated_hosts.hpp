// Several hosts on one machine: one Linux network namespace per host, joined by a veth pair (two
// hosts) with its own address each (10.77.0.1, 10.77.0.2), and optionally a link rate shaped by
// tc's tbf qdisc on both ends. A program run in a host's namespace reaches the other host only
// across the veth: loopback is its own. Needs root and iproute2 (CI runs as root; `make test`
// installs iproute2); create() says why when the machine cannot make namespaces.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "support/cli_run.hpp"

namespace genesis::testing {

class SimulatedHosts {
 public:
  // Two hosts; `rate` ("10gbit", "1gbit") shapes the link, "" leaves it unshaped. nullopt, with
  // `why_not` set, where namespaces cannot be made here.
  static std::optional<SimulatedHosts> create(const std::string& rate, std::string& why_not) {
    SimulatedHosts hosts;
    const std::string tag = std::to_string(::getpid());
    for (int i = 0; i < 2; ++i) hosts.names_.push_back("genesis-host" + std::to_string(i) + "-" + tag);
    const std::string a = "gv0-" + tag, b = "gv1-" + tag;
    std::vector<std::vector<std::string>> steps = {
        {"ip", "netns", "add", hosts.names_[0]},
        {"ip", "netns", "add", hosts.names_[1]},
        {"ip", "link", "add", a, "type", "veth", "peer", "name", b},
        {"ip", "link", "set", a, "netns", hosts.names_[0]},
        {"ip", "link", "set", b, "netns", hosts.names_[1]}};
    for (int i = 0; i < 2; ++i) {
      const std::string& ns = hosts.names_[i];
      const std::string& dev = i == 0 ? a : b;
      steps.push_back({"ip", "-n", ns, "addr", "add", hosts.address(i) + "/24", "dev", dev});
      steps.push_back({"ip", "-n", ns, "link", "set", dev, "up"});
      steps.push_back({"ip", "-n", ns, "link", "set", "lo", "up"});
      if (!rate.empty())
        steps.push_back({"ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf",
                         "rate", rate, "burst", "1mb", "latency", "100ms"});
    }
    hosts.devices_ = {a, b};
    for (const auto& step : steps) {
      const CliResult r = run_process(step);
      if (r.exit_code != 0) {
        why_not = "cannot simulate hosts with network namespaces here (`";
        for (const auto& word : step) why_not += (word == step.front() ? "" : " ") + word;
        why_not += "` failed: " + r.err + "); it needs root and iproute2";
        run_process({"ip", "link", "del", a});  // a veth not yet moved into a namespace
        return std::nullopt;
      }
    }
    return hosts;
  }

  SimulatedHosts(SimulatedHosts&& other) noexcept : names_(std::move(other.names_)),
                                                    devices_(std::move(other.devices_)) {
    other.names_.clear();
  }
  SimulatedHosts& operator=(SimulatedHosts&&) = delete;
  // Deleting a namespace deletes its end of the veth, and with it the pair.
  ~SimulatedHosts() {
    for (const auto& name : names_) run_process({"ip", "netns", "del", name});
  }

  std::string address(int host) const { return "10.77.0." + std::to_string(host + 1); }

  // The host's network namespace (`ip netns pids NAME` lists its processes).
  const std::string& name(int host) const { return names_.at(host); }

  // The host's end of the link, e.g. for GLOO_SOCKET_IFNAME.
  const std::string& device(int host) const { return devices_.at(host); }

  // The host's name (its own UTS namespace): "host0", "host1".
  std::string hostname(int host) const { return "host" + std::to_string(host); }

  // argv that runs `command` on `host`: in its network namespace, under its own host name.
  std::vector<std::string> on(int host, std::vector<std::string> command) const {
    command.insert(command.begin(), {"ip", "netns", "exec", names_.at(host), "unshare", "--uts",
                                     "sh", "-c", "hostname \"$0\" && exec \"$@\"",
                                     hostname(host)});
    return command;
  }

  // Bytes `host` has sent over its end of the link so far (the kernel's counter).
  std::uint64_t tx_bytes(int host) const {
    const CliResult r = run_process({"ip", "netns", "exec", names_.at(host), "cat",
                                     "/sys/class/net/" + devices_.at(host) + "/statistics/tx_bytes"});
    return r.exit_code == 0 ? std::stoull(r.out) : 0;
  }

  // Takes `host`'s end of the link down or up, as a cut cable would.
  void set_link(int host, bool up) const {
    run_process({"ip", "-n", names_.at(host), "link", "set", devices_.at(host), up ? "up" : "down"});
  }

 private:
  SimulatedHosts() = default;
  std::vector<std::string> names_;
  std::vector<std::string> devices_;
};

}  // namespace genesis::testing
