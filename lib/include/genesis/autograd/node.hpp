// A node of the backward graph: one recorded op. It maps the gradients of its outputs to the
// gradients of its inputs; edges point to the nodes that produced those inputs (or to the
// AccumulateGrad node of a leaf). Ops record themselves with autograd::record().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "genesis/tensor/tensor.hpp"

namespace genesis::autograd {

class Node;

struct Edge {
  std::shared_ptr<Node> fn;  // null: this input needs no gradient
  std::uint32_t input_nr = 0;
};

class Node {
 public:
  Node();
  virtual ~Node() = default;
  // grad_outputs has one entry per output (zeros where an output got no gradient); returns one
  // gradient per next_edges entry (undefined where none is needed).
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) = 0;
  virtual std::string name() const = 0;

  std::vector<Edge> next_edges;
  // One entry per output, to make zero gradients for outputs that got none.
  struct OutputMeta {
    Shape shape;
    DType dtype;
    Device device;
  };
  std::vector<OutputMeta> output_meta;
  // Creation order; the engine runs later nodes first so a layer's gradients are ready in
  // reverse order of the forward pass (DDP relies on that order).
  std::uint64_t sequence_nr;
};

// Which inputs of a recorded op want a gradient, by position.
using NeedsGrad = std::vector<bool>;
using BackwardFn =
    std::function<std::vector<Tensor>(const std::vector<Tensor>& grad_outputs, const NeedsGrad&)>;

// Links `outputs` to a new node when grad mode is on and any input requires grad; otherwise
// does nothing. The backward closure must not capture the outputs themselves (that would be a
// cycle): capture output.detach() instead.
void record(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
            BackwardFn backward);

// True when record() would record for these inputs.
bool any_requires_grad(const std::vector<Tensor>& inputs);

}  // namespace genesis::autograd
