// The one reader of the launcher's environment contract (DESIGN.md, "Environment contract"):
// RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR/PORT, TORCHELASTIC_RESTART_COUNT
// and the GENESIS_* variables. Unset and empty read as absent; a value that is malformed or out of
// its range throws InvalidArgument naming the variable and the value. Not here: writing the
// contract (launch/worker_env) and mapping SLURM's variables onto it (launch/slurm).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace genesis::env {

// Looks one variable up: the process environment unless a caller (a test, doctor's checks of
// another process's variables) supplies its own.
using Lookup = std::function<std::optional<std::string>(const std::string&)>;
Lookup process_lookup();

// An integer variable and the range its values must lie in. `kind` completes the error message
// "NAME must be <kind>".
struct IntVar {
  std::string_view name;
  long long min;
  long long max;
  std::string_view kind = "an integer";
};

inline constexpr long long kMaxCount = 1 << 30;  // bound on ranks, sizes and counts
inline constexpr IntVar kRank{"RANK", 0, kMaxCount};
inline constexpr IntVar kLocalRank{"LOCAL_RANK", 0, kMaxCount};
inline constexpr IntVar kWorldSize{"WORLD_SIZE", 1, kMaxCount};
inline constexpr IntVar kLocalWorldSize{"LOCAL_WORLD_SIZE", 1, kMaxCount};
inline constexpr IntVar kGroupRank{"GROUP_RANK", 0, kMaxCount};
inline constexpr IntVar kMasterPort{"MASTER_PORT", 1, 65535, "a port"};
inline constexpr IntVar kTorchelasticRestartCount{"TORCHELASTIC_RESTART_COUNT", 0, kMaxCount};
inline constexpr IntVar kRestartCount{"GENESIS_RESTART_COUNT", 0, kMaxCount};
inline constexpr IntVar kAttempt{"GENESIS_ATTEMPT", 0, kMaxCount};
inline constexpr IntVar kMaxRestarts{"GENESIS_MAX_RESTARTS", 0, kMaxCount};
inline constexpr IntVar kStorePort{"GENESIS_STORE_PORT", 1, 65535, "a port"};

// Every integer and text variable of the contract, for checks that look at all of them (doctor).
// GENESIS_TIMEOUT_S, a number of seconds, has its own reader below.
inline constexpr IntVar kContractInts[] = {
    kRank,         kLocalRank, kWorldSize,   kLocalWorldSize, kGroupRank, kMasterPort,
    kRestartCount, kAttempt,   kMaxRestarts, kStorePort,      kTorchelasticRestartCount};
inline constexpr std::string_view kContractTexts[] = {"MASTER_ADDR", "GENESIS_RUN_ID",
                                                      "GENESIS_STORE_TOKEN"};
inline constexpr std::string_view kTimeoutVar = "GENESIS_TIMEOUT_S";

// What is wrong with `text` as a value of `var` ("RANK='x' is not a number (...)"), or nullopt.
std::optional<std::string> int_problem(const IntVar& var, std::string_view text);
std::optional<std::string> timeout_problem(std::string_view text);

// The variable's value when set and not empty.
std::optional<std::string> read_text(std::string_view name, const Lookup& env = process_lookup());
// The variable's value when set and not empty; InvalidArgument (int_problem's text) when invalid.
std::optional<long long> read_int(const IntVar& var, const Lookup& env = process_lookup());
// As read_int, but an invalid value reads as absent: for reports that must not throw.
std::optional<long long> read_valid_int(const IntVar& var, const Lookup& env = process_lookup());

// The contract, typed.
std::optional<int> rank(const Lookup& env = process_lookup());
std::optional<int> local_rank(const Lookup& env = process_lookup());
std::optional<int> world_size(const Lookup& env = process_lookup());
std::optional<int> local_world_size(const Lookup& env = process_lookup());
std::optional<std::string> master_addr(const Lookup& env = process_lookup());
std::optional<int> master_port(const Lookup& env = process_lookup());
// The port of the launcher's rendezvous store (set by `genesis launch`; MASTER_PORT stays free).
std::optional<int> store_port(const Lookup& env = process_lookup());
std::optional<std::string> store_token(const Lookup& env = process_lookup());
std::optional<std::string> run_id(const Lookup& env = process_lookup());
// Failures restarted so far: GENESIS_RESTART_COUNT, else TORCHELASTIC_RESTART_COUNT, else 0.
int restart_count(const Lookup& env = process_lookup());
// Which attempt of a launched job this is: GENESIS_ATTEMPT, else GENESIS_RESTART_COUNT (a
// launcher that predates GENESIS_ATTEMPT counted every restart there), else 0.
int launch_attempt(const Lookup& env = process_lookup());
// GENESIS_TIMEOUT_S (genesis launch --timeout): a positive number of seconds.
std::optional<double> timeout_s(const Lookup& env = process_lookup());
// GENESIS_ONE_GPU_PER_RANK=1: the launcher gave every local rank a GPU of its own.
bool one_gpu_per_rank(const Lookup& env = process_lookup());
// GENESIS_TERMINAL=1: the launcher relays this rank's stderr to a terminal.
bool terminal_relayed(const Lookup& env = process_lookup());
// The local Hugging Face Hub cache as huggingface_hub finds it: HF_HUB_CACHE (or its old name
// HUGGINGFACE_HUB_CACHE), HF_HOME/hub, XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub.
std::string hf_hub_cache(const Lookup& env = process_lookup());
// genesis's own cache (the token cache): XDG_CACHE_HOME/genesis, else ~/.cache/genesis.
std::string genesis_cache(const Lookup& env = process_lookup());
// GENESIS_CHAT_TEMPLATE_NOW: Unix seconds that chat templates' strftime_now reads instead of the
// clock, so that a rendering can be reproduced.
inline constexpr IntVar kChatTemplateNow{"GENESIS_CHAT_TEMPLATE_NOW", 0, 253402300799,
                                         "Unix seconds"};
std::optional<long long> chat_template_now(const Lookup& env = process_lookup());

}  // namespace genesis::env
