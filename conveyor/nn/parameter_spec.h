// A parameter's layout over the mesh, declared by the layer that creates it: how the tensor is
// split over the tensor-parallel ranks (tensor_parallel_split.h) and over which mesh axes its
// gradient is summed after a step (the data-parallel replicas by default). Everything that handles
// a parameter by name after it exists (checkpoint save and load, Hugging Face import and export,
// the gradient norm, the whole-tensor gather, the gradient reduction) reads its spec here instead
// of guessing from the name; a new kind of parameter (an expert's weights over an expert axis, a
// norm under sequence parallelism) enters by declaring a new spec.
//
// Thread-safety: ParameterSpecs is a plain value; const methods may run concurrently.
#ifndef CONVEYOR_NN_PARAMETER_SPEC_H_
#define CONVEYOR_NN_PARAMETER_SPEC_H_

#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "conveyor/mesh/mesh.h"
#include "conveyor/nn/tensor_parallel_split.h"

namespace conveyor {

struct ParameterSpec {
  TensorParallelSplit tp;  // replicated unless declared split
  // The axes whose ranks hold copies of this parameter (or of its shard) that see different
  // data, so that its gradient is the sum over them: the data-parallel group. Others to come:
  // data x context parallel for every dense parameter under context parallelism, the
  // experts' own data-parallel group for an expert's weights, the tensor-parallel group for a
  // norm under sequence parallelism. Every axis set a model declares must be one whose groups
  // the trainer creates (PipelineModel::GradientSumAxes).
  Mesh::Order grad_sum = {MeshAxis::kDp};
  bool operator==(const ParameterSpec&) const = default;
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
