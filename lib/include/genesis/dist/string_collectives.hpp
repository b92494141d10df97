// Collectives over text (torch.distributed's all_gather_object for strings): how ranks agree on
// a file name, exchange a JSON index, or learn that another rank failed, over the same process
// group as the tensors. The bytes travel as i64 words, which every backend supports.
#pragma once

#include <string>
#include <vector>

#include "genesis/dist/process_group.hpp"

namespace genesis::dist {

// Every rank's `text`, indexed by rank, on every rank.
std::vector<std::string> all_gather_strings(ProcessGroup& group, const std::string& text);

// Root's `text` on every rank.
std::string broadcast_string(ProcessGroup& group, const std::string& text, int root = 0);

// Every rank passes its error ("" when it succeeded); every rank then throws the same IoError
// "<what>: rank R: <error>" for the first failed rank, or returns when none failed. Lets a step
// that can fail on one rank (a disk write) fail on all of them instead of leaving the others
// waiting in the next collective until the timeout.
void agree_or_throw(ProcessGroup& group, const std::string& error, const std::string& what);

}  // namespace genesis::dist
