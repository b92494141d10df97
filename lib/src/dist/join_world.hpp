// Every rank checks in with the store before its process group forms. Until all have, rank 0
// says which are missing (after 10 s, then every minute), and at the timeout every rank stops
// naming them, where the group's own rendezvous would only name a store key it waited for.
// torch's store-based barrier in init_process_group logs its waiting alike.
#pragma once

#include "genesis/rendezvous/store.hpp"

namespace genesis::dist::detail {

// `store` is the attempt's own (keys under it are this join's). Timeout after `timeout`:
// "ranks that never arrived: 1, 3", the words the launcher's summary reads.
void join_world(rendezvous::Store& store, int rank, int world_size, Milliseconds timeout);

}  // namespace genesis::dist::detail
