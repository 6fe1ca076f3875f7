#include "conveyor/train/model_task.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "conveyor/comm/local_transport.h"
#include "conveyor/comm/rank_threads.h"
#include "conveyor/train/builtin_tasks.h"
#include "conveyor/train/pipeline_model.h"
#include "conveyor/train/train_testing.h"

namespace conveyor {
namespace {

std::vector<TrainConfig> EveryModel() {
  TrainConfig classifier = TinyGpt();
  classifier.model.kind = ModelKind::kClassifier;
  TrainConfig tied = TinyLlama();
  tied.model.tie_embeddings = true;
  return {TinyGpt(), TinyLlama(), tied, classifier};
}

// Each layer built alone is that layer of the whole model, and LayerShapes lists its
// parameters (a model's own LayerShapes says what the default, building them, finds).
TEST(ModelTaskTest, EachLayerAloneIsThatLayerOfTheWholeModel) {
  at::set_num_threads(1);
  for (const TrainConfig& c : EveryModel()) {
    const auto model = MakeModelTask(c);
    const std::string what = model->Describe();
    const LayerList whole = BuildAllLayers(*model);
    ASSERT_EQ(static_cast<int>(whole.size()), model->num_layers()) << what;
    ASSERT_EQ(model->LayerFlops().size(), whole.size()) << what;
    const std::vector<ParameterShapes> shapes = model->LayerShapes();
    EXPECT_EQ(shapes, model->ModelTask::LayerShapes()) << what;
    ASSERT_EQ(shapes.size(), whole.size()) << what;
    for (int l = 0; l < model->num_layers(); ++l) {
      const LayerList alone = model->BuildLayers({}, {l, l + 1});
      ASSERT_EQ(alone.size(), 1u);
      const NamedTensors mine = alone[0]->NamedParameters();
      const NamedTensors theirs = whole[l]->NamedParameters();
      ASSERT_EQ(mine.size(), theirs.size()) << what << " layer " << l;
      ASSERT_EQ(mine.size(), shapes[l].size()) << what << " layer " << l;
      for (size_t i = 0; i < mine.size(); ++i) {
        EXPECT_EQ(mine[i].first, theirs[i].first) << what;
        EXPECT_TRUE(at::equal(mine[i].second, theirs[i].second)) << what << " " << mine[i].first;
        EXPECT_EQ(mine[i].second.sizes().vec(), shapes[l].at(mine[i].first)) << what;
      }
    }
  }
}

TEST(ModelTaskTest, CountsATiedTensorOnce) {
  EXPECT_EQ(CountParameters({{{"a", {2, 3}}, {"b", {4}}}, {{"a", {2, 3}}}}), 10);
  EXPECT_EQ(CountParameters({}), 0);
}

// Forwards to a model and records every range of layers built through it.
class RecordingModel : public ModelTask {
 public:
  explicit RecordingModel(std::shared_ptr<const ModelTask> model) : model_(std::move(model)) {}

  int num_layers() const override { return model_->num_layers(); }
  LayerList BuildLayers(const ParallelContext& parallel, LayerRange range) const override {
    built_.push_back(range);
    return model_->BuildLayers(parallel, range);
  }
  std::vector<ParameterShapes> LayerShapes() const override { return model_->LayerShapes(); }
  std::vector<double> LayerFlops() const override { return model_->LayerFlops(); }
  std::string Describe() const override { return model_->Describe(); }

  const std::vector<LayerRange>& built() const { return built_; }

 private:
  std::shared_ptr<const ModelTask> model_;
  mutable std::vector<LayerRange> built_;
};

// At pp 4 with two stages a rank (interleaved 1F1B), every rank builds the layers of its own
// stages, each once, and nothing else; its weights are the whole model's.
TEST(ModelTaskTest, APipelineRankBuildsOnlyItsOwnStages) {
  at::set_num_threads(1);
  TrainConfig c = TinyLlama();
  c.model.layers = 10;
  c.pp = 4;
  c.schedule = "interleaved-1f1b";
  c.chunks = 2;
  c.microbatches = 4;
  const auto model = MakeModelTask(c);
  std::map<std::string, at::Tensor> whole;
  for (const auto& layer : BuildAllLayers(*model)) {
    for (const auto& [name, p] : layer->NamedParameters()) whole[name] = p;
  }
  auto world = LocalWorld(c.pp, {});
  std::vector<std::shared_ptr<RecordingModel>> recorders;
  for (int r = 0; r < c.pp; ++r) recorders.push_back(std::make_shared<RecordingModel>(model));
  std::vector<std::vector<LayerRange>> owned(c.pp);
  std::vector<std::map<std::string, at::Tensor>> params(c.pp);
  RunRankThreads(world, [&](int r) {
    PipelineModel pipeline(c, recorders[r], InProcessRank(world[r].get(), c.device));
    for (int stage : pipeline.program().layout.stages_of(pipeline.pipeline_rank())) {
      owned[r].push_back(pipeline.partition()[pipeline.program().layout.part_of(stage)]);
    }
    for (const auto& [name, p] : pipeline.Parameters()) params[r][name] = p;
  });
  int layers_built = 0;
  for (int r = 0; r < c.pp; ++r) {
    std::vector<LayerRange> built = recorders[r]->built();
    for (auto* ranges : {&built, &owned[r]}) {
      std::sort(ranges->begin(), ranges->end(),
                [](const LayerRange& a, const LayerRange& b) { return a.begin < b.begin; });
    }
    ASSERT_EQ(built.size(), owned[r].size()) << "rank " << r;
    for (size_t k = 0; k < built.size(); ++k) {
      EXPECT_EQ(built[k].begin, owned[r][k].begin) << "rank " << r;
      EXPECT_EQ(built[k].end, owned[r][k].end) << "rank " << r;
      EXPECT_LT(built[k].size(), model->num_layers()) << "rank " << r;
      layers_built += built[k].size();
    }
    EXPECT_LT(params[r].size(), whole.size()) << "rank " << r;
    for (const auto& [name, p] : params[r]) {
      EXPECT_TRUE(at::equal(p, whole.at(name))) << "rank " << r << " " << name;
    }
  }
  EXPECT_EQ(layers_built, model->num_layers());
}

}  // namespace
}  // namespace conveyor
