// The model on a mesh: one rank's share of a model split over dp x tp x pp ranks. It resolves
// the rank's device and precision, creates the process groups, cuts the model's layers into
// the schedule's stages by cost and builds this rank's stages (their tensor-parallel shards,
// on its device). A rank builds the layers of its own stages and no others, one stage at a
// time, and reads only their weights; the cut is made from the model's costs and parameter
// shapes without building anything. Everything that running the model needs and nothing that
// training it needs: the optimizer, the gradient reduction and sync, loss scaling and the step are
// Trainer's (trainer.h); evaluation, generation and checkpoints take a PipelineModel.
//
// Groups (comm/mesh_groups.h): every TP group, the dense layers' DP groups and every pipeline
// are created in that order, on every rank (collective over `world`); then, with
// config.ep > 1, the expert layers' mesh over the same ranks (Mesh::FoldExperts: experts
// borrow data-parallel ranks; its pipelines must be the dense mesh's) and its EP and expert-DP
// groups. The TP, EP and gradient-sum groups are timed (TimedTransport), so that a step's
// collectives can be traced on their own tracks. The layers receive one ParallelContext
// holding the groups they communicate over. When any gradient-sum group has more than one
// rank the program carries REDUCE_GRAD actions (WithGradReductions), which do nothing until a
// hook is set on the executor.
//
// Devices: the stages' parameters, activations and messages live on this rank's device. On
// CUDA the constructing thread gets the device as its current device and a stream of its own
// from the pool as its current stream (ranks as threads sharing a GPU compute side by side);
// every later call must come from that thread. Messages between stages are in the compute
// dtype (bf16 / fp16 halve their bytes; Stage::set_message_dtype).
//
// Every rank constructs one with the same config and model (collective). Not thread-safe;
// the rank's world must outlive it.
#ifndef CONVEYOR_TRAIN_PIPELINE_MODEL_H_
#define CONVEYOR_TRAIN_PIPELINE_MODEL_H_

#include <c10/core/Device.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "conveyor/comm/mesh_groups.h"
#include "conveyor/comm/rank_context.h"
#include "conveyor/comm/transport.h"
#include "conveyor/mesh/mesh.h"
#include "conveyor/nn/parallel_context.h"
#include "conveyor/partition/partition.h"
#include "conveyor/profile/timed_transport.h"
#include "conveyor/runtime/pipeline_rank.h"
#include "conveyor/schedule/program.h"
#include "conveyor/train/model_task.h"
#include "conveyor/train/train_config.h"
#include "conveyor/train/train_task.h"

namespace conveyor {

class MoeMlp;

class PipelineModel {
 public:
  // `rank.world` has dp x tp x pp ranks (config.dp 0: as many replicas as fit), or is null
  // for one rank; the model computes on `rank.device`. `data`, when given, is what
  // config.partition = profile times the layers on (the ranks average their timings, so they
  // all cut alike); without it, profile is refused. Throws UserError for a configuration that
  // cannot run (a world the mesh does not fill, schedule preconditions, fewer layers than
  // stages, a dtype the device cannot compute in).
  PipelineModel(const TrainConfig& config, std::shared_ptr<const ModelTask> model,
                const RankContext& rank, const TrainTask* data = nullptr);

  const TrainConfig& config() const { return config_; }
  // Every rank of the run (null with one rank) and this rank in it.
  Transport* world() const { return world_; }
  int rank() const { return rank_; }
  // Where this rank computes (config.device resolved).
  const c10::Device& device() const { return device_; }
  const Mesh& mesh() const { return mesh_; }
  const MeshCoords& coords() const { return coords_; }
  // The pipeline this rank is a stage rank of (the ranks sharing its dp and tp coordinates;
  // the world itself when it is the whole world; null with one rank) and this rank in it.
  Transport* pipeline_group() const { return pipeline_group_; }
  int pipeline_rank() const { return coords_.pp; }
  // The groups a parameter's gradient may be summed over, which every rank creates: the
  // dense layers' data-parallel groups (dp x cp with context parallelism), with config.ep > 1
  // the experts', and tp x dp (x cp) where sums_over_tp. A parameter declaring another
  // (Resolve) is an internal error when the trainer sums it.
  std::vector<GradientSum> GradientSums() const;
  // The group of GradientSums that a parameter declaring `declared` (ParameterSpec::grad_sum)
  // sums over: itself, but an expert's with ep 1, whose mesh is the dense one, and with
  // context parallelism a dense one's over cp too.
  GradientSum Resolve(const GradientSum& declared) const;
  // This rank's group of `sum` (one of GradientSums), timed; null when it has one rank.
  TimedTransport* gradient_sum_group(const GradientSum& sum) const;
  // This rank's data-parallel, tensor-parallel and expert-parallel groups, timed (null when
  // that axis has one rank).
  // (With context parallelism the dense layers' group is dp x cp: the loss and the gradients
  // are summed over both.)
  TimedTransport* dp_group() const { return gradient_sum_group(Resolve({})); }
  TimedTransport* tp_group() const { return tp_timed_.get(); }
  TimedTransport* ep_group() const { return ep_timed_.get(); }
  // The same ranks' group for the forward halves of overlapped pairs (overlaps_pairs; null
  // without, or without expert parallelism).
  TimedTransport* overlap_ep_group() const { return overlap_ep_timed_.get(); }
  // Whether the executor runs the halves of the program's overlapped pairs (OVERLAP_F_B:
  // DualPipe, DualPipeV) at once (runtime/executor.h): on the CPU, without tensor
  // parallelism (whose collectives would cross lanes), unless config.sequential_pairs. The
  // same on every rank.
  // Whether Mixture-of-Experts blocks split their tokens over the TP ranks (experts and tp >
  // 1: moe_mlp.h), their routers' gradients then summed over tp x dp and their experts' over
  // the experts' data-parallel group, which holds TP ranks.
  bool routes_over_tp() const;
  // Whether some parameters' gradients are summed over tp x dp (ReplicatedSpec): routers under
  // routes_over_tp, the norms under sequence parallelism, per-head query and key norms.
  bool sums_over_tp() const;
  bool overlaps_pairs() const;
  // The groups this rank's layers communicate over (tp size 1 without TP).
  const ParallelContext& parallel() const { return parallel_; }
  // How each parameter of this rank's stages is laid out over the mesh, as its layers
  // declared it (parameter_spec.h).
  const ParameterSpecs& parameter_specs() const { return specs_; }
  // Whether this rank's pipeline is the one that writes checkpoints and traces (dp = tp = 0:
  // the other replicas hold the same weights; the other TP ranks hand it their shards).
  bool leads_replicas() const { return coords_.dp == 0 && coords_.tp == 0 && coords_.cp == 0; }
  // The lowered program this rank runs every step.
  const Program& program() const { return program_; }
  const std::vector<LayerRange>& partition() const { return partition_; }
  // Which pipeline ranks hold each parameter name (several for a tied embedding, DualPipe's
  // two copies).
  const std::map<std::string, std::vector<int>>& holders() const { return holders_; }
  // Those of holders() that train: a LoRA run's adapters alone (their names say so on every
  // rank, so that the ranks agree on the groups summing shared gradients).
  std::map<std::string, std::vector<int>> TrainedHolders() const;
  // This rank's parameters (global names; a name twice for two local copies).
  NamedTensors Parameters() const { return pipeline_->NamedParameters(); }
  // Those of them that train (requires_grad): every one but a LoRA run's frozen base
  // (nn/lora.h). Only these have gradients, optimizer state, gradient sums and a share of
  // the gradient norm.
  NamedTensors TrainedParameters() const;
  // The whole tensor of which `local` is this rank's tensor-parallel shard, laid out as the
  // parameter `name` (it, its gradient or its optimizer state): a collective over the TP
  // group (every TP rank calls it for the same tensors in the same order), a padded
  // vocabulary's padding dropped; `local` itself without tensor parallelism or when replicated.
  at::Tensor GatherWhole(const std::string& name, const at::Tensor& local) const;
  // `tensors` (by a parameter's name, or "<name>/<state>" for its optimizer state) with, in
  // place of this rank's experts' tensors, those of every expert of its expert-parallel
  // group, each under its own expert's name; the others as they are. A collective over the
  // EP group (its ranks call it with the same parameters but for the expert indices); `tensors`
  // itself with ep 1.
  std::map<std::string, at::Tensor> GatherExperts(
      const std::map<std::string, at::Tensor>& tensors) const;
  PipelineRank& pipeline() { return *pipeline_; }
  // The Mixture-of-Experts blocks of this rank's stages (Layer::expert_block), stage by
  // stage; owned by their layers.
  std::vector<MoeMlp*> ExpertBlocks() const;
  // The dtype of the messages between stages: the compute dtype (fp32, bf16 or fp16).
  c10::ScalarType message_dtype() const { return message_dtype_; }
  // Seconds this rank spent building its stages: drawing or reading their weights, moving
  // them to its device.
  double stage_build_s() const { return stage_build_s_; }

 private:
  // Whether the experts' gradients are summed over a mesh of their own (Mesh::FoldExperts):
  // ep > 1, or experts routed over TP ranks.
  bool folds_experts() const;

  TrainConfig config_;
  std::shared_ptr<const ModelTask> model_;
  Transport* world_;
  int rank_;
  c10::Device device_;
  Mesh mesh_;
  MeshCoords coords_;
  // The groups this rank belongs to (a group of one rank is null, but for the pipeline,
  // which always has a transport when the world has one).
  std::unique_ptr<MeshGroups> groups_, expert_groups_, overlap_groups_;
  std::unique_ptr<TimedTransport> tp_timed_, ep_timed_, overlap_ep_timed_;
  std::map<GradientSum, std::unique_ptr<TimedTransport>> gradient_sum_groups_;
  Transport* pipeline_group_ = nullptr;
  ParallelContext parallel_;
  ParameterSpecs specs_;  // this rank's stages' parameters
  Program program_;
  std::vector<LayerRange> partition_;
  std::map<std::string, std::vector<int>> holders_;
  c10::ScalarType message_dtype_;
  double stage_build_s_ = 0;
  std::unique_ptr<PipelineRank> pipeline_;
};

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_PIPELINE_MODEL_H_
