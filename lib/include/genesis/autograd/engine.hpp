// The backward engine: runs the recorded graph from one or more roots in reverse topological
// order, accumulating into the .grad of leaves and firing their grad-ready hooks as each
// leaf's gradient becomes final.
#pragma once

#include <vector>

#include "genesis/tensor/tensor.hpp"

namespace genesis::autograd {

// grads[i] is d(something)/d(roots[i]); an undefined entry means ones for a one-element root.
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads = {});

}  // namespace genesis::autograd
