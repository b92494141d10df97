// What every strategy's state_pieces() and load_state() share (names in ckpt/state_piece.hpp):
// the logical names, whole tensors, and the translation between a flat shard (flat_params.hpp)
// and the element ranges of the parameters it intersects, for values and optimizer state alike.
// Not here: which rank saves what (each strategy decides) and the checkpoint files (ckpt/).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "flat_params.hpp"
#include "genesis/ckpt/state_piece.hpp"
#include "genesis/optim/optimizer.hpp"

namespace genesis::parallel::detail {

using ckpt::StatePiece;
using ckpt::StateSource;

std::string model_name(const std::string& tensor);  // "model.<tensor>"
std::string optimizer_name(const std::string& param, const std::string& state);

// One optimizer slot's state (Optimizer::state_tensors() split by "<index>.").
struct SlotState {
  std::int64_t step = 0;
  optim::NamedTensors buffers;  // (state name, tensor), optimizer order
};
std::map<std::size_t, SlotState> state_by_slot(const optim::NamedTensors& state);

// A whole tensor as one piece (a view of `t`, detached).
StatePiece whole_piece(const std::string& name, const Tensor& t);
// A whole parameter's optimizer slot as pieces: "optimizer.<param>.step" and each buffer.
void append_slot_pieces(const std::string& param, const SlotState& state,
                        std::vector<StatePiece>& out);

// This rank's share of whole pieces that every rank holds alike (replicated state), about
// 1/world of the bytes each: a piece of 16 MiB or more is cut into one element range per rank,
// a smaller one goes whole to the rank with the fewest bytes so far. Every rank computes the same
// assignment.
std::vector<StatePiece> balanced_pieces(std::vector<StatePiece> whole, int world, int rank);

// Throws InvalidArgument naming `name` unless `source` holds it with shape `shape`.
void check_entry(const StateSource& source, const std::string& name, const Shape& shape);
// check_entry for "model.<name>" of each tensor, so that a bad source fails before any load.
void check_model_entries(const StateSource& source, const nn::NamedTensors& tensors);
// Copies logical tensor `name` into `target` (checked shape; the copy converts dtype and device).
void load_whole(const StateSource& source, const std::string& name, const Tensor& target);

// What an optimizer keeping `buffer_names` (Optimizer::state_names()) needs from `source` for
// `params`: each parameter the source has a step for must have every one of those buffers, so a
// missing one is an error naming it rather than an incomplete state.
struct OptimizerLayout {
  std::optional<std::string> reference;  // the first parameter with state; none: model-only
  std::vector<std::string> fields;       // the buffer names: "exp_avg", ...
};
OptimizerLayout optimizer_layout(const StateSource& source, const nn::NamedTensors& params,
                                 std::vector<std::string> buffer_names);

// A whole parameter's optimizer state as Optimizer::load_state_tensors wants it for `slot`
// ("<slot>.step", "<slot>.<buffer>"); empty when the source has none for it.
optim::NamedTensors read_slot(const StateSource& source, const OptimizerLayout& layout,
                              const std::string& param, const Shape& shape, std::size_t slot);

// Shard `index` of `flat`'s layout, given as `shard` (shard_numel,): one piece per parameter it
// intersects, named prefix + parameter + suffix, viewing `shard` (full-shape when it holds the
// whole parameter). A parameter of no elements goes with shard 0.
void append_shard_pieces(const FlatParams& flat, int index, const Tensor& shard,
                         const std::string& prefix, const std::string& suffix,
                         std::vector<StatePiece>& out);
// The optimizer slot stepping that shard: its buffers split as above, and its step once per
// parameter, by the shard holding the parameter's first element.
void append_shard_slot_pieces(const FlatParams& flat, int index, const SlotState& state,
                              std::vector<StatePiece>& out);

// Reads shard `index` of `flat`'s layout of the parameters' values: a new (shard_numel,) tensor
// of `like`'s dtype and device, zero in alignment gaps and padding.
Tensor read_shard(const StateSource& source, const FlatParams& flat, int index, const Tensor& like);
// The optimizer state of that shard for `slot`, or empty if the parameters it intersects have
// none; a shard of pure padding takes the step of layout.reference.
optim::NamedTensors read_shard_slot(const StateSource& source, const OptimizerLayout& layout,
                                    const FlatParams& flat, int index, std::size_t slot);

// Optimizer::load_state_tensors with the strategy's name on its errors.
void load_optimizer(optim::Optimizer& optimizer, const optim::NamedTensors& state,
                    const std::string& strategy);

}  // namespace genesis::parallel::detail
