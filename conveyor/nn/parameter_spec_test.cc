#include "conveyor/nn/parameter_spec.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "conveyor/comm/local_transport.h"
#include "conveyor/comm/rank_threads.h"
#include "conveyor/common/error.h"
#include "conveyor/nn/classifier.h"
#include "conveyor/nn/gpt.h"
#include "conveyor/nn/layer.h"
#include "conveyor/nn/llama.h"
#include "conveyor/nn/tensor_parallel.h"

namespace conveyor {
namespace {

TEST(ParameterSpecTest, UndeclaredIsReplicatedAndADeclarationMustNotChange) {
  ParameterSpecs specs;
  EXPECT_TRUE(specs.Of("anything").tp.replicated());
  specs.Declare("w", RowParallel());
  specs.Declare("w", RowParallel());  // a tied tensor, declared by both of its layers
  EXPECT_EQ(specs.Of("w").tp, RowParallel().tp);
  EXPECT_THROW(specs.Declare("w", ColumnParallel()), InternalError);
  ParameterSpecs more;
  more.Declare("kv", KeyValueParallel(2));
  specs.Add(more);
  EXPECT_EQ(specs.Of("kv").tp.replicas, 2);
  EXPECT_EQ(specs.declared().size(), 2u);
}

using Build = std::function<LayerList(const TensorParallel& tp)>;

// Every parameter of the model `build` makes, on every rank of tp 1, 2 and 4: a tensor whose
// part differs from the whole is declared split, and every declared split takes from the
// whole exactly the rank's part, and gathers back to the whole exactly.
void ExpectEveryParameterRoundTrips(const Build& build, const std::string& what) {
  std::map<std::string, at::Tensor> whole;
  for (const auto& layer : build({})) {
    for (const auto& [name, p] : layer->NamedParameters()) whole[name] = p.detach();
  }
  for (int p : {1, 2, 4}) {
    const auto world = LocalWorld(p);
    RunRankThreads(world, [&](int r) {
      const TensorParallel tp{p, r, world[r].get(), 1};
      const LayerList layers = build(tp);
      const ParameterSpecs specs = ParameterSpecsOf(layers);
      std::set<std::string> seen;  // a tied tensor is held twice
      for (const auto& layer : layers) {
        for (const auto& [name, local] : layer->NamedParameters()) {
          SCOPED_TRACE(what + " tp " + std::to_string(p) + " rank " + std::to_string(r) + " " +
                       name);
          seen.insert(name);
          const at::Tensor& full = whole.at(name);
          const TensorParallelSplit split = specs.Of(name).tp;
          EXPECT_TRUE(split.replicated() || specs.declared().count(name) == 1);
          EXPECT_TRUE(local.sizes() == full.sizes() || !split.replicated()) << "undeclared split";
          EXPECT_TRUE(at::equal(TakeShard(full, split, p, r), local.detach()));
          const int64_t extent = split.replicated() ? 0 : full.size(split.dim);
          EXPECT_TRUE(at::equal(GatherShards(local.detach(), split, tp, extent), full));
        }
      }
      EXPECT_EQ(seen.size(), whole.size()) << what;
    });
  }
}

// The model `build` makes of `config` for each rank's tensor-parallel group.
template <typename Config>
Build Sharded(const Config& config, LayerList (*build)(const Config&, uint64_t, int, int)) {
  return [config, build](const TensorParallel& tp) {
    Config c = config;
    c.tp = tp;
    return build(c, 3, 0, -1);
  };
}

TEST(ParameterSpecTest, EveryParameterOfEveryModelIsGatheredAndSplitBitIdentically) {
  at::set_num_threads(1);
  GptConfig gpt;
  gpt.hidden = 32;
  gpt.layers = 2;
  gpt.max_seq_len = 8;
  ExpectEveryParameterRoundTrips(Sharded(gpt, &BuildGpt), "gpt");
  // GPT-2's shape: a vocabulary no TP size divides (padded), tanh GELU, tied.
  GptConfig gpt2 = gpt;
  gpt2.vocab = 29;
  gpt2.gelu_tanh = true;
  gpt2.tie_embeddings = true;
  ExpectEveryParameterRoundTrips(Sharded(gpt2, &BuildGpt), "gpt-2");
  LlamaConfig llama;
  llama.vocab = 30;
  llama.hidden = 32;
  llama.intermediate = 48;
  llama.heads = 4;
  llama.kv_heads = 4;
  llama.layers = 2;
  llama.max_seq_len = 8;
  ExpectEveryParameterRoundTrips(Sharded(llama, &BuildLlama), "llama");
  ClassifierConfig classifier;
  classifier.hidden = 32;
  classifier.layers = 2;
  classifier.max_seq_len = 8;
  ExpectEveryParameterRoundTrips(Sharded(classifier, &BuildClassifier), "classifier");
}

}  // namespace
}  // namespace conveyor
