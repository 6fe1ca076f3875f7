// AdamW over named parameters, the interface the trainer steps it through (Optimizer: AdamW
// here, its ZeRO-1 sharding in sharded_adamw.h), the kernels its update runs through, and the
// learning-rate schedule (linear warm-up, then cosine decay to a floor).
//
// AdamW (Loshchilov & Hutter, 2019): decoupled weight decay, bias-corrected moments. The
// state of each parameter (exp_avg, exp_avg_sq) lives under the parameter's global name, so
// a checkpoint can be resharded across any partition. Copies of one parameter (tied weights,
// DualPipe's two model copies) given the same gradient get the same update and stay equal.
//
// Not thread-safe; one optimizer per rank.
#ifndef CONVEYOR_OPTIM_OPTIMIZER_H_
#define CONVEYOR_OPTIM_OPTIMIZER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "conveyor/module/stage_module.h"
#include "conveyor/optim/adamw_kernel.h"

namespace conveyor {

// The kernel `kernel` means for parameters on `device`: never kAuto. UserError when kFused is
// asked of a libtorch without the fused kernel (it names the version and what to use).
AdamWKernel ResolveAdamWKernel(AdamWKernel kernel, c10::Device device);

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;  // applied to tensors of two or more dimensions only
  AdamWKernel kernel = AdamWKernel::kAuto;
  // kForEach's chunk: the bytes of parameters whose denominators it holds at once.
  int64_t foreach_chunk_bytes = int64_t{256} << 20;
};

// Tensors that AdamW updates together: params[i] from grads[i] with its moments exp_avgs[i]
// and exp_avg_sqs[i], each four of one shape; all on one device and of one dtype. The
// tensors are handles (views of the trainer's or the optimizer's storage): updates write
// through them.
struct AdamWTensors {
  std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs;

  void Add(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& exp_avg,
           const at::Tensor& exp_avg_sq);
};

// An optimizer over one rank's named parameters, as the trainer and checkpoints use it.
// Implementations say which calls are collective.
class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // One update at learning rate `lr`; `step` counts updates from 1.
  virtual void Step(const NamedTensors& params, double lr, int64_t step) = 0;
  // Whole optimizer state by "<name>/exp_avg" and "<name>/exp_avg_sq" (the first copy of a
  // name); empty before the first Step or LoadState.
  virtual std::map<std::string, at::Tensor> State() const = 0;
  // Restores state for the parameters in `params` from whole tensors in `state` (as State()
  // gives them). Throws UserError naming the first missing or mis-shaped entry; loads nothing
  // then.
  virtual void LoadState(const NamedTensors& params,
                         const std::map<std::string, at::Tensor>& state) = 0;
  // Bytes of optimizer state this rank holds now.
  virtual int64_t StateBytes() const = 0;
};

class AdamW : public Optimizer {
 public:
  explicit AdamW(AdamWOptions options) : options_(options) {}

  // One update of every parameter with a gradient. Each copy under one name keeps its own
  // state (equal for equal inputs).
  void Step(const NamedTensors& params, double lr, int64_t step) override;
  std::map<std::string, at::Tensor> State() const override;
  void LoadState(const NamedTensors& params,
                 const std::map<std::string, at::Tensor>& state) override;
  int64_t StateBytes() const override;

  // The AdamW update of `param` from `grad`, in place, with its moments `exp_avg` and
  // `exp_avg_sq` (updated in place): update `step` (from 1) at rate `lr`; `decay`: whether
  // weight decay applies (it does to parameters of two or more dimensions). Elementwise, so a
  // slice of a parameter updated with the same slices of the others gets the values the
  // whole update gives it. All four tensors have one shape.
  static void Update(const AdamWOptions& options, const at::Tensor& param, const at::Tensor& grad,
                     const at::Tensor& exp_avg, const at::Tensor& exp_avg_sq, double lr,
                     int64_t step, bool decay);
  // Update of every tensor of `tensors`, through options.kernel (ResolveAdamWKernel on their
  // device): each as Update gives it, up to rounding. `decay` for all of them.
  static void UpdateAll(const AdamWOptions& options, const AdamWTensors& tensors, double lr,
                        int64_t step, bool decay);
  // state[key] for parameter `param` (key "<name>/exp_avg" or "<name>/exp_avg_sq"), in the
  // parameter's dtype, not shared with `state`. Throws UserError when it is missing or has
  // another shape than the parameter.
  static at::Tensor StateEntry(const std::map<std::string, at::Tensor>& state,
                               const std::string& key, const at::Tensor& param);

 private:
  struct Moments {
    at::Tensor exp_avg, exp_avg_sq;
  };
  AdamWOptions options_;
  // Keyed by the parameter's storage: copies under one name have their own moments.
  std::map<const void*, Moments> moments_;
  std::map<const void*, std::string> names_;
};

struct LrSchedule {
  double lr = 3e-3;
  double min_lr_ratio = 0.1;  // floor of the cosine, as a fraction of lr
  int64_t warmup_steps = 10;
  int64_t total_steps = 100;

  // The rate of update `step` (1-based).
  double At(int64_t step) const;
};

}  // namespace conveyor

#endif  // CONVEYOR_OPTIM_OPTIMIZER_H_
