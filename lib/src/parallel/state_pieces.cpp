// Logical state names and the flat-shard <-> parameter-range translation (see state_pieces.hpp).
//
// Terms: shard `index` of a FlatParams layout is the element range [index * shard_numel,
// (index + 1) * shard_numel) of the flat buffer; a parameter's overlap with it is the part of
// that range inside [offset, offset + numel), expressed both in the parameter's own flattening
// (what a StatePiece's offset means) and in the shard (where the elements sit locally).
#include "state_pieces.hpp"

#include <algorithm>
#include <charconv>

#include "genesis/core/error.hpp"

namespace genesis::parallel::detail {
namespace {

struct Overlap {
  std::int64_t begin = 0, end = 0;  // in the parameter's flattening; empty when begin == end
  std::int64_t at = 0;              // where `begin` sits in the shard
  std::int64_t numel() const { return end - begin; }
};

Overlap overlap(const FlatParams& flat, int index, std::size_t i) {
  const std::int64_t first = index * flat.shard_numel, last = first + flat.shard_numel;
  const std::int64_t offset = flat.offsets[i], numel = flat.params[i].second.numel();
  const std::int64_t begin = std::max(first, offset), end = std::min(last, offset + numel);
  if (begin >= end) return {};
  return {begin - offset, end - offset, begin - first};
}

// Whether shard `index` holds parameter i's first element (a parameter without any: shard 0).
bool holds_first(const FlatParams& flat, int index, std::size_t i) {
  if (flat.params[i].second.numel() == 0 || flat.shard_numel == 0) return index == 0;
  return flat.offsets[i] / flat.shard_numel == index;
}

std::int64_t read_step(const StateSource& source, const std::string& name) {
  GENESIS_CHECK(source.contains(name), InvalidArgument, "checkpoint state has no '" + name + "'");
  GENESIS_CHECK(shape_numel(source.shape(name)) == 1, InvalidArgument,
                "'" + name + "' must be one count, the checkpoint's has shape " +
                    shape_str(source.shape(name)));
  const auto step = source.read(name, 0, 1).item<std::int64_t>();
  GENESIS_CHECK(step > 0, InvalidArgument,
                "'" + name + "' is " + std::to_string(step) + ", not a positive count");
  return step;
}

Tensor step_tensor(std::int64_t step) {
  return Tensor::scalar(static_cast<double>(step), DType::i64);
}

}  // namespace

std::string model_name(const std::string& tensor) { return "model." + tensor; }

std::string optimizer_name(const std::string& param, const std::string& state) {
  return "optimizer." + param + "." + state;
}

std::map<std::size_t, SlotState> state_by_slot(const optim::NamedTensors& state) {
  std::map<std::size_t, SlotState> out;
  for (const auto& [name, t] : state) {
    const auto dot = name.find('.');
    std::size_t slot = 0;
    const auto [ptr, ec] = std::from_chars(name.data(), name.data() + dot, slot);
    GENESIS_CHECK(dot != std::string::npos && ec == std::errc() && ptr == name.data() + dot,
                  InvalidArgument, "optimizer state name '" + name + "' is not '<index>.<name>'");
    const std::string field = name.substr(dot + 1);
    if (field == "step")
      out[slot].step = t.item<std::int64_t>();
    else
      out[slot].buffers.emplace_back(field, t);
  }
  return out;
}

StatePiece whole_piece(const std::string& name, const Tensor& t) {
  return StatePiece{name, t.shape(), 0, t.detach()};
}

std::vector<StatePiece> balanced_pieces(std::vector<StatePiece> whole, int world, int rank) {
  constexpr std::int64_t kSplitBytes = std::int64_t{16} << 20;
  std::vector<std::int64_t> load(static_cast<std::size_t>(world), 0);
  std::vector<StatePiece> mine;
  for (StatePiece& piece : whole) {
    const std::int64_t numel = piece.data.numel();
    const std::int64_t bytes = numel * static_cast<std::int64_t>(dtype_size(piece.data.dtype()));
    if (bytes >= kSplitBytes && numel >= world) {
      const std::int64_t begin = numel * rank / world, end = numel * (rank + 1) / world;
      for (int r = 0; r < world; ++r)
        load[static_cast<std::size_t>(r)] += bytes * (r + 1) / world - bytes * r / world;
      mine.push_back({piece.name, piece.shape, begin,
                      piece.data.contiguous().reshape({numel}).slice(0, begin, end)});
      continue;
    }
    const auto least = std::min_element(load.begin(), load.end()) - load.begin();
    load[static_cast<std::size_t>(least)] += bytes;
    if (least == rank) mine.push_back(std::move(piece));
  }
  return mine;
}

void append_slot_pieces(const std::string& param, const SlotState& state,
                        std::vector<StatePiece>& out) {
  out.push_back(StatePiece{optimizer_name(param, "step"), {}, 0, step_tensor(state.step)});
  for (const auto& [field, t] : state.buffers)
    out.push_back(whole_piece(optimizer_name(param, field), t));
}

void check_entry(const StateSource& source, const std::string& name, const Shape& shape) {
  GENESIS_CHECK(source.contains(name), InvalidArgument, "checkpoint state has no '" + name + "'");
  const Shape stored = source.shape(name);
  GENESIS_CHECK(stored == shape, InvalidArgument,
                "'" + name + "' has shape " + shape_str(stored) + " in the checkpoint, but " +
                    shape_str(shape) + " in this model");
}

void check_model_entries(const StateSource& source, const nn::NamedTensors& tensors) {
  for (const auto& [name, t] : tensors) check_entry(source, model_name(name), t.shape());
}

void load_whole(const StateSource& source, const std::string& name, const Tensor& target) {
  check_entry(source, name, target.shape());
  Tensor dst = target.detach();
  dst.copy_(source.read_full(name));
}

OptimizerLayout optimizer_layout(const StateSource& source, const nn::NamedTensors& params,
                                 std::vector<std::string> buffer_names) {
  OptimizerLayout layout{.reference = std::nullopt, .fields = std::move(buffer_names)};
  for (const auto& [name, p] : params) {
    if (source.contains(optimizer_name(name, "step"))) {
      layout.reference = name;
      break;
    }
  }
  return layout;
}

optim::NamedTensors read_slot(const StateSource& source, const OptimizerLayout& layout,
                              const std::string& param, const Shape& shape, std::size_t slot) {
  const std::string step = optimizer_name(param, "step");
  if (!source.contains(step)) {
    for (const std::string& field : layout.fields)
      GENESIS_CHECK(!source.contains(optimizer_name(param, field)), InvalidArgument,
                    "checkpoint state has '" + optimizer_name(param, field) + "' but no '" + step +
                        "'");
    return {};
  }
  const std::string prefix = std::to_string(slot) + ".";
  optim::NamedTensors out;
  out.emplace_back(prefix + "step", step_tensor(read_step(source, step)));
  for (const std::string& field : layout.fields) {
    const std::string name = optimizer_name(param, field);
    check_entry(source, name, shape);
    out.emplace_back(prefix + field, source.read_full(name));
  }
  return out;
}

void append_shard_pieces(const FlatParams& flat, int index, const Tensor& shard,
                         const std::string& prefix, const std::string& suffix,
                         std::vector<StatePiece>& out) {
  const Tensor values = shard.detach();
  for (std::size_t i = 0; i < flat.params.size(); ++i) {
    const auto& [pname, p] = flat.params[i];
    const std::string name = prefix + pname + suffix;
    if (p.numel() == 0) {
      if (index == 0)
        out.push_back(StatePiece{name, p.shape(), 0, Tensor::empty(p.shape(), values.dtype(),
                                                                    values.device())});
      continue;
    }
    const Overlap o = overlap(flat, index, i);
    if (o.numel() == 0) continue;
    Tensor part = values.slice(0, o.at, o.at + o.numel());
    if (o.numel() == p.numel()) part = part.view(p.shape());
    out.push_back(StatePiece{name, p.shape(), o.begin, part});
  }
}

void append_shard_slot_pieces(const FlatParams& flat, int index, const SlotState& state,
                              std::vector<StatePiece>& out) {
  for (const auto& [field, t] : state.buffers)
    append_shard_pieces(flat, index, t, "optimizer.", "." + field, out);
  for (std::size_t i = 0; i < flat.params.size(); ++i)
    if (holds_first(flat, index, i))
      out.push_back(StatePiece{optimizer_name(flat.params[i].first, "step"), {}, 0,
                               step_tensor(state.step)});
}

Tensor read_shard(const StateSource& source, const FlatParams& flat, int index,
                  const Tensor& like) {
  Tensor out = Tensor::zeros({flat.shard_numel}, like.dtype(), like.device());
  for (std::size_t i = 0; i < flat.params.size(); ++i) {
    const auto& [pname, p] = flat.params[i];
    const std::string name = model_name(pname);
    check_entry(source, name, p.shape());
    const Overlap o = overlap(flat, index, i);
    if (o.numel() == 0) continue;
    out.slice(0, o.at, o.at + o.numel()).copy_(source.read(name, o.begin, o.numel()));
  }
  return out;
}

optim::NamedTensors read_shard_slot(const StateSource& source, const OptimizerLayout& layout,
                                    const FlatParams& flat, int index, std::size_t slot) {
  // The parameters this shard intersects must agree: one flat tensor has one step.
  std::vector<std::size_t> hit;
  std::optional<std::int64_t> step;
  std::string stepped, unstepped;
  for (std::size_t i = 0; i < flat.params.size(); ++i) {
    if (overlap(flat, index, i).numel() == 0) continue;
    hit.push_back(i);
    const std::string& pname = flat.params[i].first;
    const std::string name = optimizer_name(pname, "step");
    if (!source.contains(name)) {
      if (unstepped.empty()) unstepped = pname;
      continue;
    }
    const std::int64_t s = read_step(source, name);
    GENESIS_CHECK(!step || *step == s, InvalidArgument,
                  "'" + name + "' is " + std::to_string(s) + " but '" +
                      optimizer_name(stepped, "step") + "' is " + std::to_string(*step) +
                      ", and one optimizer shard of this strategy steps both");
    if (!step) stepped = pname;
    step = s;
  }
  if (hit.empty()) {
    if (!layout.reference) return {};
    stepped = *layout.reference;
    step = read_step(source, optimizer_name(stepped, "step"));
  }
  if (!step) return {};
  GENESIS_CHECK(unstepped.empty(), InvalidArgument,
                "checkpoint state has no '" + optimizer_name(unstepped, "step") + "' but has '" +
                    optimizer_name(stepped, "step") + "', and one optimizer shard of this "
                    "strategy steps both");

  const std::string prefix = std::to_string(slot) + ".";
  optim::NamedTensors out;
  out.emplace_back(prefix + "step", step_tensor(*step));
  for (const std::string& field : layout.fields) {
    const std::string reference = optimizer_name(stepped, field);
    Tensor buffer;  // the stored dtype, known from the first read
    for (std::size_t i : hit) {
      const auto& [pname, p] = flat.params[i];
      const std::string name = optimizer_name(pname, field);
      check_entry(source, name, p.shape());
      const Overlap o = overlap(flat, index, i);
      Tensor part = source.read(name, o.begin, o.numel());
      if (!buffer.defined()) buffer = Tensor::zeros({flat.shard_numel}, part.dtype());
      buffer.slice(0, o.at, o.at + o.numel()).copy_(part);
    }
    if (!buffer.defined()) {  // pure padding: zeros of the reference's dtype
      GENESIS_CHECK(source.contains(reference), InvalidArgument,
                    "checkpoint state has no '" + reference + "'");
      const std::int64_t n = std::min<std::int64_t>(1, shape_numel(source.shape(reference)));
      buffer = Tensor::zeros({flat.shard_numel}, source.read(reference, 0, n).dtype());
    }
    out.emplace_back(prefix + field, buffer);
  }
  return out;
}

void load_optimizer(optim::Optimizer& optimizer, const optim::NamedTensors& state,
                    const std::string& strategy) {
  try {
    optimizer.load_state_tensors(state);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(strategy + ": the checkpoint's optimizer state does not fit this "
                                     "optimizer: " + e.what());
  }
}

}  // namespace genesis::parallel::detail
