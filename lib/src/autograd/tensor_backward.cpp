// Tensor::backward, declared with Tensor so user code reads like PyTorch's loss.backward(), but
// defined here beside the engine it calls: the tensor layer below autograd never reaches up.
#include "genesis/autograd/engine.hpp"
#include "genesis/tensor/tensor.hpp"

namespace genesis {

void Tensor::backward(const Tensor& grad) const { autograd::backward({*this}, {grad}); }

}  // namespace genesis
