// A parameter's layout over the mesh, declared by the layer that creates it: how the tensor is
// split over the tensor-parallel ranks (tensor_parallel_split.h), over which mesh axes its
// gradient is summed after a step (the data-parallel replicas by default), and its name in a
// Hugging Face folder. Everything that handles a parameter by name after it exists
// (checkpoint save and load, Hugging Face import and export, the gradient norm, the
// whole-tensor gather, the gradient reduction) reads its spec here instead of guessing from
// the name; a new kind of parameter (an expert's weights over an expert axis, a norm under
// sequence parallelism) enters by declaring a new spec.
//
// Thread-safety: ParameterSpecs is a plain value; const methods may run concurrently.
#ifndef CONVEYOR_NN_PARAMETER_SPEC_H_
#define CONVEYOR_NN_PARAMETER_SPEC_H_

#include <compare>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "conveyor/mesh/mesh.h"
#include "conveyor/nn/tensor_parallel_split.h"

namespace conveyor {

// The ranks whose copies of a parameter (or of its shard) see different data, so that its
// gradient is the sum over them: the groups along `axes` of the dense layers' mesh, or, for
// an expert's weights (`experts`), of the expert layers' mesh (Mesh::FoldExperts), whose
// data-parallel axis is the experts' own. The default: the data-parallel replicas. Others to
// come: data x context parallel under context parallelism, the tensor-parallel group for a
// norm under sequence parallelism.
struct GradientSum {
  bool experts = false;
  Mesh::Order axes = {MeshAxis::kDp};
  auto operator<=>(const GradientSum&) const = default;
};

// A parameter's tensor in a Hugging Face folder: its name there, without the prefix of the
// module holding the model ("transformer." in a GPT2LMHeadModel's file); empty: the parameter's
// own name (a Llama's). `transposed`: stored (in, out), as GPT-2's Conv1D weights are.
struct HfName {
  std::string name;
  bool transposed = false;
  bool operator==(const HfName&) const = default;
};

struct ParameterSpec {
  TensorParallelSplit tp;  // replicated unless declared split
  // Every group a model declares must be one the trainer creates
  // (PipelineModel::GradientSums).
  GradientSum grad_sum;
  HfName hf;
  bool operator==(const ParameterSpec&) const = default;

  // This spec, stored in a Hugging Face folder as `name` (transposed when `transposed`).
  ParameterSpec StoredAs(std::string name, bool transposed = false) const;
};

// The common layouts of a transformer's parameters over p tensor-parallel ranks.
//   ColumnParallel   a linear's output features: weight (out, in) -> (out / p, in), bias too
//   FusedColumnParallel(b)  b stacked column-parallel blocks (a QKV weight: 3), each split
//   RowParallel      a linear's input features: weight (out, in) -> (out, in / p)
//   VocabParallel    a vocabulary table (V, C) -> (ceil(V / p), C), padded
//   KeyValueParallel(r)  a key or value projection whose heads are each held by r ranks
ParameterSpec ColumnParallel();
ParameterSpec FusedColumnParallel(int blocks);
ParameterSpec RowParallel();
ParameterSpec VocabParallel();
ParameterSpec KeyValueParallel(int replicas);
// An expert's weight, whole on the one expert-parallel rank holding it (replicated over
// tensor-parallel ranks), its gradient summed over the experts' data-parallel group.
ParameterSpec ExpertWeight();

// Specs by a parameter's global name. A name never declared is replicated.
class ParameterSpecs {
 public:
  // Records `name`'s spec. A name declared again (a tied embedding: both layers holding it
  // declare it) must come with the same spec; another is an internal error.
  void Declare(const std::string& name, const ParameterSpec& spec);
  // Declares every spec of `other`.
  void Add(const ParameterSpecs& other);
  const ParameterSpec& Of(std::string_view name) const;
  // The declared names, sorted.
  const std::map<std::string, ParameterSpec, std::less<>>& declared() const { return specs_; }

 private:
  std::map<std::string, ParameterSpec, std::less<>> specs_;
};

}  // namespace conveyor

#endif  // CONVEYOR_NN_PARAMETER_SPEC_H_
