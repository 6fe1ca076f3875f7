#include "conveyor/optim/sharded_adamw.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "conveyor/common/error.h"
#include "conveyor/device/torch_compat.h"

namespace conveyor {
namespace {

// `t`'s elements in order, as a view (t must be contiguous).
at::Tensor Flat(const at::Tensor& t) {
  CONVEYOR_ASSERT(t.is_contiguous()) << "ShardedAdamW needs contiguous parameters";
  return t.view({-1});
}

}  // namespace

ShardedAdamW::ShardedAdamW(AdamWOptions options, Transport* group)
    : options_(options), group_(group) {
  CONVEYOR_ASSERT(group_ != nullptr) << "ShardedAdamW needs a data-parallel group";
}

void ShardedAdamW::Bind(const NamedTensors& params) {
  CONVEYOR_ASSERT(!params.empty()) << "ShardedAdamW needs parameters";
  if (names_.empty()) {
    for (const auto& [name, p] : params) {
      CONVEYOR_ASSERT(p.scalar_type() == params.front().second.scalar_type())
          << "ShardedAdamW needs parameters of one dtype: " << name;
      names_.push_back(name);
      shapes_.push_back(p.sizes().vec());
      numels_.push_back(p.numel());
    }
    layout_.emplace(params, group_->world_size(), group_->rank());
    return;
  }
  CONVEYOR_ASSERT(params.size() == names_.size())
      << params.size() << " parameters, " << names_.size() << " before";
  for (size_t i = 0; i < params.size(); ++i) {
    CONVEYOR_ASSERT(params[i].first == names_[i] && params[i].second.sizes() == shapes_[i])
        << "parameter " << i << " changed: " << params[i].first << " " << params[i].second.sizes();
  }
}

std::vector<ShardedAdamW::Piece> ShardedAdamW::PiecesOf(int shard) const {
  const int64_t begin = layout_->range(shard).first;
  std::vector<Piece> pieces;
  int64_t offset = 0;  // of parameter i in the flat vector
  for (size_t i = 0; i < numels_.size(); ++i) {
    const auto [lo, hi] = layout_->Overlap(offset, numels_[i], shard);
    if (lo < hi) pieces.push_back(Piece{i, lo - offset, hi - lo, lo - begin});
    offset += numels_[i];
  }
  return pieces;
}

void ShardedAdamW::Step(const NamedTensors& params, double lr, int64_t step) {
  at::NoGradGuard no_grad;
  Bind(params);
  const int me = group_->rank();
  const int shards = group_->world_size();
  if (!exp_avg_.defined()) {
    const auto [begin, end] = layout_->range(me);
    exp_avg_ = at::zeros({end - begin}, params.front().second.options());
    exp_avg_sq_ = at::zeros_like(exp_avg_);
  }
  // This replica's range, updated in place.
  const int64_t longest = layout_->range(0).second;
  at::Tensor mine = at::zeros({longest}, exp_avg_.options());
  const std::vector<Piece> pieces = PiecesOf(me);
  AdamWTensors decayed, plain;  // weight decay on pieces of tensors of two or more dimensions
  for (const Piece& piece : pieces) {
    const auto& [name, p] = params[piece.param];
    CONVEYOR_ASSERT(p.grad().defined()) << "ShardedAdamW: " << name << " has no gradient";
    (p.dim() >= 2 ? decayed : plain)
        .Add(Flat(p).narrow(0, piece.begin, piece.length),
             p.grad().reshape({-1}).narrow(0, piece.begin, piece.length),
             exp_avg_.narrow(0, piece.at, piece.length),
             exp_avg_sq_.narrow(0, piece.at, piece.length));
  }
  AdamW::UpdateAll(options_, decayed, lr, step, true);
  AdamW::UpdateAll(options_, plain, lr, step, false);
  std::vector<at::Tensor> into, from;
  for (const Piece& piece : pieces) {
    into.push_back(mine.narrow(0, piece.at, piece.length));
    from.push_back(Flat(params[piece.param].second).narrow(0, piece.begin, piece.length));
  }
  CopyEach(into, from);
  // Every other replica's range, into the parameters.
  const std::vector<at::Tensor> ranges = group_->AllGather(mine);
  into.clear();
  from.clear();
  for (int r = 0; r < shards; ++r) {
    if (r == me) continue;
    for (const Piece& piece : PiecesOf(r)) {
      into.push_back(Flat(params[piece.param].second).narrow(0, piece.begin, piece.length));
      from.push_back(ranges[r].narrow(0, piece.at, piece.length));
    }
  }
  CopyEach(into, from);
}

at::Tensor ShardedAdamW::GatherRanges(const at::Tensor& mine) const {
  const int shards = group_->world_size();
  at::Tensor padded = at::zeros({layout_->range(0).second}, mine.options());
  padded.narrow(0, 0, mine.numel()).copy_(mine);
  const std::vector<at::Tensor> ranges = group_->AllGather(padded);
  std::vector<at::Tensor> parts;
  for (int r = 0; r < shards; ++r) {
    const auto [begin, end] = layout_->range(r);
    parts.push_back(ranges[r].narrow(0, 0, end - begin));
  }
  return at::cat(parts);
}

std::map<std::string, at::Tensor> ShardedAdamW::State() const {
  std::map<std::string, at::Tensor> state;
  if (!exp_avg_.defined()) return state;  // alike on every replica: all stepped or none
  for (const auto& [suffix, range] :
       {std::pair{"/exp_avg", &exp_avg_}, {"/exp_avg_sq", &exp_avg_sq_}}) {
    const at::Tensor whole = GatherRanges(*range);
    int64_t offset = 0;
    for (size_t i = 0; i < names_.size(); ++i) {
      // emplace keeps the first copy of a name.
      state.emplace(names_[i] + suffix,
                    whole.narrow(0, offset, numels_[i]).view(shapes_[i]).clone());
      offset += numels_[i];
    }
  }
  return state;
}

void ShardedAdamW::LoadState(const NamedTensors& params,
                             const std::map<std::string, at::Tensor>& state) {
  // Every entry checked before anything changes.
  std::vector<at::Tensor> exp_avgs, exp_avg_sqs;
  for (const auto& [name, p] : params) {
    exp_avgs.push_back(AdamW::StateEntry(state, name + "/exp_avg", p));
    exp_avg_sqs.push_back(AdamW::StateEntry(state, name + "/exp_avg_sq", p));
  }
  Bind(params);
  const auto [begin, end] = layout_->range(group_->rank());
  exp_avg_ = at::empty({end - begin}, params.front().second.options());
  exp_avg_sq_ = at::empty_like(exp_avg_);
  for (const Piece& piece : PiecesOf(group_->rank())) {
    exp_avg_.narrow(0, piece.at, piece.length)
        .copy_(exp_avgs[piece.param].reshape({-1}).narrow(0, piece.begin, piece.length));
    exp_avg_sq_.narrow(0, piece.at, piece.length)
        .copy_(exp_avg_sqs[piece.param].reshape({-1}).narrow(0, piece.begin, piece.length));
  }
}

int64_t ShardedAdamW::StateBytes() const {
  if (!exp_avg_.defined()) return 0;
  return static_cast<int64_t>(exp_avg_.nbytes() + exp_avg_sq_.nbytes());
}

}  // namespace conveyor
