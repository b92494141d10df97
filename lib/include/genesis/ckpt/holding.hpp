// What one directory's copy of a checkpoint holds of it. A checkpoint saved into a shared run
// directory holds every rank's file; a node-local one (training.node_local_checkpoints) holds on
// each node that node's ranks' files, and its manifest says which node and host wrote each of the
// others. `genesis ckpt ls`, `info` and `verify` report what is here and where the rest is;
// `export` and `reshard`, which read every file, refuse a partial copy with that list first.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "genesis/ckpt/manifest.hpp"

namespace genesis::ckpt {

struct Holding {
  struct Away {
    int rank = 0;
    std::string file;
    int node = -1;     // the node that wrote it, -1 when the manifest does not say
    std::string host;  // its host name, "" when the manifest does not say
  };
  bool node_local = false;  // the manifest says the nodes kept their own ranks' files
  int world_size = 0;
  std::vector<int> here;    // ranks whose file is present, at the manifest's size
  std::vector<Away> away;   // the others, in rank order
  bool whole() const { return away.empty(); }
  // "ranks 0, 1 of 4 here; rank-00002.safetensors, rank-00003.safetensors on node 1 (host1)"
  std::string describe() const;
};

Holding holding_of(const std::filesystem::path& dir, const Manifest& manifest);

// IoError when a rank file is not here: `what` ("cannot export") the files missing and where
// they are, with what to do about a node-local checkpoint.
void require_whole(const std::filesystem::path& dir, const Manifest& manifest,
                   const std::string& what);

}  // namespace genesis::ckpt
