// Run id and store token resolution (see job_identity.hpp). The derivation hashes the words every
// node's command line shares with FNV-1a (stable across machines and builds, unlike std::hash).
#include "genesis/launch/job_identity.hpp"

#include <cstdint>
#include <cstdio>

#include "genesis/core/env.hpp"
#include "genesis/launch/worker_env.hpp"

namespace genesis::launch {
namespace {

std::uint64_t fnv1a(const std::string& text, std::uint64_t hash) {
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

}  // namespace

std::string derived_hex(const std::string& words, int seeds) {
  std::string hex;
  for (int i = 0; i < seeds; ++i) {
    char part[17];
    std::snprintf(part, sizeof part, "%016llx",
                  static_cast<unsigned long long>(
                      fnv1a(words, 0xcbf29ce484222325ull ^ (0x9e3779b97f4a7c15ull * (i + 1)))));
    hex += part;
  }
  return hex;
}

namespace {

std::string shared_words(const LaunchOptions& options) {
  return options.master_addr + ":" + std::to_string(resolved_master_port(options)) + "/" +
         std::to_string(options.nnodes);
}

}  // namespace

std::string resolved_run_id(const LaunchOptions& options) {
  if (!options.run_id.empty()) return options.run_id;
  if (auto job = env::read_text("SLURM_JOB_ID")) return *job;
  if (options.nnodes > 1) return derived_hex("run|" + shared_words(options), 1).substr(0, 12);
  return random_hex(6);
}

StoreToken resolved_store_token(const LaunchOptions& options, const std::string& run_id) {
  if (!options.store_token.empty()) return {options.store_token, TokenOrigin::given};
  if (auto token = env::store_token()) return {*token, TokenOrigin::given};
  if (options.nnodes == 1) return {random_hex(16), TokenOrigin::random};
  return {derived_hex("token|" + run_id + "|" + shared_words(options), 2), TokenOrigin::derived};
}

}  // namespace genesis::launch
