#include "conveyor/nn/all_to_all.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "conveyor/comm/transport.h"
#include "conveyor/common/error.h"

namespace conveyor {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct Exchange : public torch::autograd::Function<Exchange> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const LaneGroups& groups,
                            const std::vector<int64_t>& send_counts,
                            const std::vector<int64_t>& recv_counts) {
    ctx->saved_data["lane0"] = reinterpret_cast<int64_t>(groups.lane0);
    ctx->saved_data["lane1"] = reinterpret_cast<int64_t>(groups.lane1);
    ctx->saved_data["send"] = send_counts;
    ctx->saved_data["recv"] = recv_counts;
    return groups.Current()->AllToAll(x, send_counts, recv_counts);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const LaneGroups groups{reinterpret_cast<Transport*>(ctx->saved_data["lane0"].toInt()),
                            reinterpret_cast<Transport*>(ctx->saved_data["lane1"].toInt())};
    const std::vector<int64_t> send = ctx->saved_data["send"].toIntVector();
    const std::vector<int64_t> recv = ctx->saved_data["recv"].toIntVector();
    return {groups.Current()->AllToAll(grads[0], recv, send), at::Tensor(), at::Tensor(),
            at::Tensor()};
  }
};

}  // namespace

at::Tensor ExchangeRows(const at::Tensor& x, const LaneGroups& groups,
                        const std::vector<int64_t>& send_counts,
                        const std::vector<int64_t>& recv_counts) {
  CONVEYOR_CHECK(groups.lane0 != nullptr) << "ExchangeRows needs a group";
  return Exchange::apply(x, groups, send_counts, recv_counts);
}

}  // namespace conveyor
