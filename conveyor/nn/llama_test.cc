#include "conveyor/nn/llama.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/nn/llama_testing.h"

namespace conveyor {
namespace {

using Named = std::map<std::string, at::Tensor>;

// Copies `values` into the parameters of `layers` with the same names.
void Load(const LayerList& layers, const Named& values) {
  at::NoGradGuard no_grad;
  for (const auto& layer : layers) {
    for (const auto& [name, p] : layer->NamedParameters()) p.copy_(values.at(name));
  }
}

TEST(LlamaTest, NamesAndShapesAreHuggingFaces) {
  const LlamaConfig c = TinyLlamaConfig();  // d = 8
  const Named named = ParametersByName(BuildLlama(c, 1));
  const std::map<std::string, std::vector<int64_t>> expected = {
      {"model.embed_tokens.weight", {48, 32}},
      {"model.norm.weight", {32}},
      {"lm_head.weight", {48, 32}},
      {"model.layers.1.input_layernorm.weight", {32}},
      {"model.layers.1.self_attn.q_proj.weight", {32, 32}},
      {"model.layers.1.self_attn.k_proj.weight", {16, 32}},
      {"model.layers.1.self_attn.v_proj.weight", {16, 32}},
      {"model.layers.1.self_attn.o_proj.weight", {32, 32}},
      {"model.layers.1.post_attention_layernorm.weight", {32}},
      {"model.layers.1.mlp.gate_proj.weight", {40, 32}},
      {"model.layers.1.mlp.up_proj.weight", {40, 32}},
      {"model.layers.1.mlp.down_proj.weight", {32, 40}},
  };
  EXPECT_EQ(named.size(), 3u + 9u * c.layers);
  for (const auto& [name, shape] : expected) {
    ASSERT_TRUE(named.count(name)) << name;
    EXPECT_EQ(named.at(name).sizes().vec(), shape) << name;
  }
  LlamaConfig tied = c;
  tied.tie_embeddings = true;
  const Named tied_named = ParametersByName(BuildLlama(tied, 1));
  EXPECT_FALSE(tied_named.count("lm_head.weight"));
  EXPECT_EQ(tied_named.size(), 2u + 9u * c.layers);
  // LlamaParameterShapes says the same without building.
  for (const LlamaConfig& config : {c, tied}) {
    std::map<std::string, std::vector<int64_t>> built;
    for (const auto& [name, p] : ParametersByName(BuildLlama(config, 1)))
      built[name] = p.sizes().vec();
    EXPECT_EQ(LlamaParameterShapes(config), built);
  }
}

// Any range of layers is built as those layers are in the whole model, with the parameters
// LlamaLayerShapes lists for them; undrawn, the shapes are the same.
TEST(LlamaTest, ARangeOfLayersIsThatPartOfTheWholeModel) {
  LlamaConfig c = TinyLlamaConfig();
  c.tie_embeddings = true;
  const LayerList whole = BuildLlama(c, 5);
  const std::vector<ParameterShapes> shapes = LlamaLayerShapes(c);
  ASSERT_EQ(whole.size(), shapes.size());
  for (int begin = 0; begin < static_cast<int>(whole.size()); ++begin) {
    for (int end = begin; end <= static_cast<int>(whole.size()); ++end) {
      const LayerList part = BuildLlama(c, 5, begin, end);
      ASSERT_EQ(part.size(), static_cast<size_t>(end - begin));
      for (int l = begin; l < end; ++l) {
        const NamedTensors mine = part[l - begin]->NamedParameters();
        const NamedTensors theirs = whole[l]->NamedParameters();
        ASSERT_EQ(mine.size(), theirs.size()) << "layer " << l;
        ParameterShapes listed;
        for (size_t i = 0; i < mine.size(); ++i) {
          EXPECT_EQ(mine[i].first, theirs[i].first);
          EXPECT_TRUE(at::equal(mine[i].second, theirs[i].second)) << mine[i].first;
          listed[mine[i].first] = mine[i].second.sizes().vec();
        }
        EXPECT_EQ(listed, shapes[l]) << "layer " << l;
      }
    }
  }
  c.weights = WeightInit::kUndrawn;
  const LayerList undrawn = BuildLlama(c, 5, 1, 2);
  for (const auto& [name, p] : undrawn[0]->NamedParameters()) {
    EXPECT_EQ(p.sizes().vec(), shapes[1].at(name)) << name;
    EXPECT_TRUE(p.requires_grad()) << name;
  }
}

// Each tensor's initial value depends on the seed and its name alone: a deeper model shares
// the shallower one's tensors exactly, the LM head is not the embedding, another seed draws
// other values.
TEST(LlamaTest, InitialWeightsDependOnSeedAndNameAlone) {
  LlamaConfig deeper = TinyLlamaConfig();
  deeper.layers = 3;
  const Named two = ParametersByName(BuildLlama(TinyLlamaConfig(), 7));
  const Named three = ParametersByName(BuildLlama(deeper, 7));
  for (const auto& [name, value] : two) {
    EXPECT_TRUE(at::equal(value, three.at(name))) << name;
  }
  EXPECT_FALSE(at::equal(two.at("lm_head.weight"), two.at("model.embed_tokens.weight")));
  EXPECT_FALSE(at::equal(
      two.at("model.layers.0.mlp.up_proj.weight"),
      ParametersByName(BuildLlama(TinyLlamaConfig(), 8)).at("model.layers.0.mlp.up_proj.weight")));
  EXPECT_NEAR(two.at("model.layers.1.mlp.gate_proj.weight").std().item<double>(), 0.02, 0.002);
}

TEST(LlamaTest, APositionSeesNoLaterToken) {
  const LayerList model = BuildLlama(TinyLlamaConfig(), 3);
  const at::Tensor ids = RandomIds(TinyLlamaConfig(), 2, 10, 5);
  at::Tensor changed = ids.clone();
  changed.select(1, 9).fill_(0);
  changed.select(1, 8).fill_(1);
  const at::Tensor a = LogitsOf(model, ids), b = LogitsOf(model, changed);
  EXPECT_TRUE(at::allclose(a.narrow(1, 0, 8), b.narrow(1, 0, 8), 0, 0));
  EXPECT_FALSE(at::allclose(a.narrow(1, 8, 2), b.narrow(1, 8, 2)));
}

// A packed sequence of documents gives each document's logits exactly as alone: attention
// within the document, rotary positions from its start. Two samples packed differently.
TEST(LlamaTest, PackedDocumentsGiveEachDocumentsLogitsAsAlone) {
  for (bool recompute : {false, true}) {
    LlamaConfig config = TinyLlamaConfig();
    config.recompute_attention = recompute;
    const LayerList model = BuildLlama(config, 3);
    const at::Tensor a = RandomIds(config, 1, 6, 5), b = RandomIds(config, 1, 10, 6);
    const at::Tensor ids = at::cat({at::cat({a, b}, 1), at::cat({b, a}, 1)}, 0);  // (2, 16)
    const at::Tensor six = at::arange(6, at::kLong), ten = at::arange(10, at::kLong);
    const at::Tensor positions = at::stack({at::cat({six, ten}), at::cat({ten, six})});
    const at::Tensor packed = LogitsOf(model, ids, positions);
    const at::Tensor alone_a = LogitsOf(model, a), alone_b = LogitsOf(model, b);
    EXPECT_LT(RelativeError(packed[0].narrow(0, 0, 6), alone_a[0]), 1e-5);
    EXPECT_LT(RelativeError(packed[0].narrow(0, 6, 10), alone_b[0]), 1e-5);
    EXPECT_LT(RelativeError(packed[1].narrow(0, 0, 10), alone_b[0]), 1e-5);
    EXPECT_LT(RelativeError(packed[1].narrow(0, 10, 6), alone_a[0]), 1e-5);
    // Without the positions, the second document attends to the first and is rotated on.
    EXPECT_GT(RelativeError(LogitsOf(model, ids)[0].narrow(0, 6, 10), alone_b[0]), 1e-3);
  }
}

// Grouped-query attention is multi-head attention whose key and value projections repeat
// each key-value head for its group of query heads.
TEST(LlamaTest, GroupedQueryAttentionIsMultiHeadWithSharedKeyValueHeads) {
  const LlamaConfig gqa = TinyLlamaConfig();  // 4 heads, 2 key-value heads of d = 8
  LlamaConfig mha = gqa;
  mha.kv_heads = gqa.heads;
  const LayerList grouped = BuildLlama(gqa, 4), full = BuildLlama(mha, 4);
  Named values = ParametersByName(grouped);
  for (int i = 0; i < gqa.layers; ++i) {
    for (const char* proj : {"k_proj", "v_proj"}) {
      const std::string name =
          "model.layers." + std::to_string(i) + ".self_attn." + proj + ".weight";
      values[name] = values[name]
                         .view({gqa.kv_heads, 8, gqa.hidden})
                         .repeat_interleave(2, 0)
                         .reshape({mha.kv_heads * 8, gqa.hidden});
    }
  }
  Load(full, values);
  const at::Tensor ids = RandomIds(gqa, 3, 12, 9);
  EXPECT_TRUE(at::allclose(LogitsOf(grouped, ids), LogitsOf(full, ids), 1e-5, 1e-6));
}

TEST(LlamaTest, RotaryEmbeddingTurnsPairsByPosition) {
  // d = 4, theta 100: pair (0, 2) turns by p rad, pair (1, 3) by p / 10 rad at position p.
  const at::Tensor x = at::tensor({1.0f, 0.0f, 0.0f, 1.0f}).repeat({1, 1, 3, 1});  // (1, 1, 3, 4)
  const at::Tensor y = RotaryEmbedding(x, 100);
  for (int p = 0; p < 3; ++p) {
    const at::Tensor row = y[0][0][p];
    EXPECT_NEAR(row[0].item<double>(), std::cos(p), 1e-6);
    EXPECT_NEAR(row[2].item<double>(), std::sin(p), 1e-6);
    EXPECT_NEAR(row[1].item<double>(), -std::sin(p / 10.0), 1e-6);
    EXPECT_NEAR(row[3].item<double>(), std::cos(p / 10.0), 1e-6);
  }
}

TEST(LlamaTest, RmsNormScalesEachVectorToUnitRootMeanSquare) {
  const at::Tensor x = at::tensor({3.0f, 4.0f, 0.0f, 0.0f}).view({1, 4});
  const at::Tensor w = at::tensor({1.0f, 2.0f, 1.0f, 1.0f});
  const at::Tensor y = RmsNorm(x, w, 0);  // rms = 2.5
  EXPECT_TRUE(at::allclose(y, at::tensor({1.2f, 3.2f, 0.0f, 0.0f}).view({1, 4})));
}

TEST(LlamaTest, BadConfigurationsAreRefusedNamingTheNumbers) {
  auto refused = [](LlamaConfig c, const std::string& text) {
    try {
      BuildLlama(c, 1);
      ADD_FAILURE() << "accepted; expected: " << text;
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  LlamaConfig c = TinyLlamaConfig();
  c.kv_heads = 3;
  refused(c, "kv_heads (3) must divide heads (4)");
  c = TinyLlamaConfig();
  c.hidden = 36;  // d = 9
  refused(c, "must be even");
  c = TinyLlamaConfig();
  c.rope_theta = 0;
  refused(c, "rope_theta");
}

}  // namespace
}  // namespace conveyor
