// The backward engine: runs the recorded graph from one or more roots in reverse topological
// order, accumulating into the .grad of leaves and firing their grad-ready hooks as each
// leaf's gradient becomes final.
#pragma once

#include <functional>
#include <vector>

#include "genesis/tensor/tensor.hpp"

namespace genesis::autograd {

// grads[i] is d(something)/d(roots[i]); an undefined entry means ones for a one-element root.
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads = {});

// Called from inside a backward pass (a grad-ready hook): `callback` runs once, on this thread,
// after the last node of the outermost pass has run and before its backward() returns (a pass
// nested inside a node, as in gradient checkpointing, does not end it); an exception
// it throws propagates out of backward(). DDP uses it to wait for its last buckets (PyTorch's
// Engine::queue_callback). Outside a backward pass: InvalidArgument.
void queue_callback(std::function<void()> callback);

// Called from inside a backward pass: `cleanup` runs if the outermost pass ends by an exception
// (a node's, a hook's or a callback's), before it leaves backward(); an exception it throws is
// dropped, so the first error is the one the caller sees. A gradient reducer settles the
// collectives it started with it. Outside a backward pass: InvalidArgument.
void on_backward_failure(std::function<void()> cleanup);

}  // namespace genesis::autograd
