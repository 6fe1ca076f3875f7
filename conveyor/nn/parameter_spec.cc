#include "conveyor/nn/parameter_spec.h"

#include "conveyor/common/error.h"

namespace conveyor {

ParameterSpec ColumnParallel() { return {.tp = TensorParallelSplit{0, 1}}; }
ParameterSpec FusedColumnParallel(int blocks) { return {.tp = TensorParallelSplit{0, blocks}}; }
ParameterSpec RowParallel() { return {.tp = TensorParallelSplit{1, 1}}; }
ParameterSpec VocabParallel() { return {.tp = TensorParallelSplit{0, 1, true}}; }
ParameterSpec ExpertWeight() { return {.grad_sum = {.experts = true}}; }
ParameterSpec KeyValueParallel(int replicas) {
  return {.tp = TensorParallelSplit{0, 1, false, replicas}};
}

ParameterSpec ParameterSpec::StoredAs(std::string name, bool transposed) const {
  ParameterSpec stored = *this;
  stored.hf = {std::move(name), transposed};
  return stored;
}

void ParameterSpecs::Declare(const std::string& name, const ParameterSpec& spec) {
  const auto [it, fresh] = specs_.try_emplace(name, spec);
  CONVEYOR_ASSERT(fresh || it->second == spec)
      << "the parameter " << name << " is declared with two different layouts";
}

void ParameterSpecs::Add(const ParameterSpecs& other) {
  for (const auto& [name, spec] : other.specs_) Declare(name, spec);
}

const ParameterSpec& ParameterSpecs::Of(std::string_view name) const {
  static const ParameterSpec kReplicated;
  const auto it = specs_.find(name);
  return it == specs_.end() ? kReplicated : it->second;
}

}  // namespace conveyor
