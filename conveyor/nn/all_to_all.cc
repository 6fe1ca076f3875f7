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
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, Transport* group,
                            const std::vector<int64_t>& send_counts,
                            const std::vector<int64_t>& recv_counts) {
    ctx->saved_data["group"] = reinterpret_cast<int64_t>(group);
    ctx->saved_data["send"] = send_counts;
    ctx->saved_data["recv"] = recv_counts;
    return group->AllToAll(x, send_counts, recv_counts);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* group = reinterpret_cast<Transport*>(ctx->saved_data["group"].toInt());
    const std::vector<int64_t> send = ctx->saved_data["send"].toIntVector();
    const std::vector<int64_t> recv = ctx->saved_data["recv"].toIntVector();
    return {group->AllToAll(grads[0], recv, send), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor ExchangeRows(const at::Tensor& x, Transport* group,
                        const std::vector<int64_t>& send_counts,
                        const std::vector<int64_t>& recv_counts) {
  CONVEYOR_CHECK(group != nullptr) << "ExchangeRows needs a group";
  return Exchange::apply(x, group, send_counts, recv_counts);
}

}  // namespace conveyor
