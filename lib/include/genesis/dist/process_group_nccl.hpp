// The NCCL process group, for tensors on one CUDA device per rank. Declared for every build so
// callers need no #ifdef: without CUDA in the build, or without a visible GPU, each entry point
// throws NotSupported saying which (the group itself lives in lib/src/dist/cuda/). Ops run on the
// group's own CUDA stream after the work already queued on the default stream; a Work completes
// when its op finished on the device, and a timed-out op aborts the communicator.
#pragma once

#include <memory>

#include "genesis/dist/process_group.hpp"
#include "genesis/rendezvous/store.hpp"

namespace genesis::dist {

// Returns when backend nccl can run in this process; otherwise throws NotSupported saying why
// ("built without CUDA: reconfigure with -DGENESIS_CUDA=ON", or no GPU visible: use gloo).
void require_nccl();
// Whether backend "auto" means nccl here: built with CUDA, a GPU visible, and either a GPU per
// local rank (LOCAL_WORLD_SIZE <= devices) or NCCL_HOSTID set (ranks sharing a GPU need it).
bool nccl_available();
// The device rank `rank` of this process uses: LOCAL_RANK (`rank` when LOCAL_RANK is unset) modulo
// the visible device count, so ranks of one node spread over its GPUs and share them when there
// are more ranks than GPUs (which NCCL allows only with a distinct NCCL_HOSTID per rank).
int nccl_device_for_rank(int rank);

// An NCCL communicator over `size` ranks on cuda:`device`. Rank 0 creates the communicator id and
// publishes it on `store` (give each group its own PrefixStore); every rank blocks until all
// `size` ranks joined or `timeout` passed (Timeout naming the ranks that never arrived).
// `timeout` is also every op's default. One rank per device per host, unless NCCL_HOSTID differs.
std::shared_ptr<ProcessGroup> make_nccl_group(std::shared_ptr<rendezvous::Store> store, int rank,
                                              int size, Milliseconds timeout, int device);

}  // namespace genesis::dist
