// PATHs that decide whether genesis finds scontrol, which it prefers to its own reading of a SLURM
// node list (launch/slurm.cpp): one without it, and one whose scontrol is a fake that names a host
// of the test's choosing. Either way the outcome no longer depends on whether this machine has
// slurm-client installed.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

namespace genesis::testing {

// A directory under `where` of links to everything in /usr/bin but scontrol: a PATH on which the
// shell, env and srun are found and scontrol is not (on merged-/usr Debian, /bin is /usr/bin).
inline std::filesystem::path path_without_scontrol(const std::filesystem::path& where) {
  namespace fs = std::filesystem;
  const fs::path bin = where / "bin-without-scontrol";
  fs::create_directories(bin);
  for (const auto& entry : fs::directory_iterator("/usr/bin"))
    if (entry.path().filename() != "scontrol" && !fs::exists(bin / entry.path().filename()))
      fs::create_symlink(entry.path(), bin / entry.path().filename());
  return bin;
}

// A directory under `where` holding only an `scontrol` whose `show hostnames` prints `host`.
inline std::filesystem::path path_with_fake_scontrol(const std::filesystem::path& where,
                                                     const std::string& host) {
  namespace fs = std::filesystem;
  const fs::path bin = where / "bin-with-fake-scontrol";
  fs::create_directories(bin);
  std::ofstream(bin / "scontrol") << "#!/bin/sh\necho '" << host << "'\n";
  fs::permissions(bin / "scontrol", fs::perms::owner_all, fs::perm_options::add);
  return bin;
}

}  // namespace genesis::testing
