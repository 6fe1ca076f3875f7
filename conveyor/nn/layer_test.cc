#include "conveyor/nn/layer.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "conveyor/nn/gpt.h"

namespace conveyor {
namespace {

// Restores this thread's intra-op thread count on exit.
class ThreadCount {
 public:
  explicit ThreadCount(int n) : before_(at::get_num_threads()) { at::set_num_threads(n); }
  ~ThreadCount() { at::set_num_threads(before_); }

 private:
  int before_;
};

// A GPT's layers built by one thread and by four at once hold the same weights.
TEST(BuildLayerRangeTest, LayersBuiltOnThreadsEqualThoseBuiltInTurn) {
  GptConfig config;
  config.layers = 6;
  LayerList alone, together;
  {
    const ThreadCount one(1);
    alone = BuildGpt(config, 11, 1, 7);
  }
  {
    const ThreadCount four(4);
    together = BuildGpt(config, 11, 1, 7);
  }
  ASSERT_EQ(alone.size(), 6u);
  ASSERT_EQ(together.size(), 6u);
  for (size_t l = 0; l < alone.size(); ++l) {
    const NamedTensors a = alone[l]->NamedParameters(), b = together[l]->NamedParameters();
    ASSERT_EQ(a.size(), b.size()) << "layer " << l;
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].first, b[i].first);
      EXPECT_TRUE(at::equal(a[i].second, b[i].second)) << a[i].first;
      EXPECT_TRUE(b[i].second.is_leaf() && b[i].second.requires_grad()) << b[i].first;
    }
  }
}

// The lowest layer's error comes out, whichever thread met it.
TEST(BuildLayerRangeTest, TheLowestLayersErrorIsRethrown) {
  const ThreadCount four(4);
  try {
    BuildLayerRange(8, 0, 8, [](int l) -> std::shared_ptr<Layer> {
      if (l == 3 || l == 6) throw std::runtime_error("layer " + std::to_string(l));
      return nullptr;
    });
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "layer 3");
  }
}

}  // namespace
}  // namespace conveyor
