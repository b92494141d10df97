// Gradient (activation) checkpointing, torch.utils.checkpoint's reentrant form: the function
// runs without recording a graph, so none of its intermediate activations stay alive; backward
// runs it again with the graph on and backpropagates through that copy. The gradients are the
// same, the peak memory is one block's activations instead of all of them, and the price is one
// more forward per block. Random draws (dropout) repeat exactly because the given generators are
// rewound to their state at the first forward.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "genesis/tensor/random.hpp"
#include "genesis/tensor/tensor.hpp"

namespace genesis::autograd {

// fn(input) with its activations recomputed in backward. Parameters fn uses receive their
// gradients during that recompute (their grad-ready hooks fire there). When grad mode is off or
// `input` does not require grad, this is plain fn(input): with nothing to backpropagate into
// from outside, there is no graph to save memory on.
Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input,
                  const std::vector<std::shared_ptr<Generator>>& generators = {});

}  // namespace genesis::autograd
