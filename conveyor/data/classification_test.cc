#include "conveyor/data/classification.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <set>
#include <string>

#include "conveyor/common/error.h"
#include "conveyor/data/data_testing.h"

namespace conveyor {
namespace {

// Categories a: 30, b: 20, c: 12, d: 5 documents, each text unique ("a7: ...").
Corpus Hand() {
  std::vector<std::pair<std::string, std::string>> docs;
  for (auto [name, count] : {std::pair{"d", 5}, {"c", 12}, {"a", 30}, {"b", 20}}) {
    for (int i = 0; i < count; ++i) {
      docs.push_back({name, std::string(name) + std::to_string(i) + ": " +
                                std::string(static_cast<size_t>(3 * i), name[0])});
    }
  }
  return CorpusOf(docs);
}

ClassificationOptions Options(int k, int64_t t, int64_t n, double held_out = 0.3) {
  ClassificationOptions options;
  options.num_classes = k;
  options.seq_len = t;
  options.batch_size = n;
  options.held_out_fraction = held_out;
  options.seed = 5;
  return options;
}

// The text of row i: its real input bytes.
std::string RowText(const Batch& batch, int64_t i) {
  std::string text;
  for (int64_t t = 0; t < batch.inputs.size(1); ++t) {
    if (batch.attention_mask[i][t].item<bool>()) {
      text.push_back(static_cast<char>(batch.inputs[i][t].item<int64_t>()));
    }
  }
  return text;
}

TEST(ClassificationTest, LargestCategoriesBecomeLabelsFromTheLargestDown) {
  const ClassificationTask task(Hand(), Options(3, 64, 4));
  EXPECT_EQ(task.class_names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(task.train_size() + task.held_out_size(), 30 + 20 + 12);  // d dropped
  std::vector<std::pair<std::string, std::string>> docs = {{"w", "w"}};
  for (int i = 0; i < 10; ++i) {
    for (const char* name : {"z", "y", "x"}) docs.push_back({name, name + std::to_string(i)});
  }
  const ClassificationTask ties(CorpusOf(docs), Options(2, 8, 2));
  EXPECT_EQ(ties.class_names(), (std::vector<std::string>{"x", "y"}));  // ties by name
}

TEST(ClassificationTest, MajorityRateOfHeldOutSplit) {
  const Corpus corpus = Hand();
  const ClassificationTask task(corpus, Options(3, 64, 4));
  std::map<std::string, int> counts;
  for (int64_t d : task.held_out_documents()) {
    ++counts[corpus.categories[corpus.documents[d].category]];
  }
  EXPECT_FALSE(counts.contains("d"));
  int majority = 0, total = 0;
  for (const auto& [name, count] : counts) {
    majority = std::max(majority, count);
    total += count;
  }
  ASSERT_EQ(total, task.held_out_size());
  EXPECT_GT(total, 8);  // about 30% of 62
  EXPECT_LT(total, 30);
  EXPECT_DOUBLE_EQ(task.MajorityRate(), static_cast<double>(majority) / total);
}

TEST(ClassificationTest, EvalCoversHeldOutOnceInOrderWithPaddedLastBatch) {
  const Corpus corpus = Hand();
  const ClassificationTask task(corpus, Options(3, 64, 4));
  ASSERT_EQ(task.EvalBatches(), (task.held_out_size() + 3) / 4);
  std::vector<int64_t> labels;
  std::vector<std::string> texts;
  int64_t padding = 0;
  for (int64_t b = 0; b < task.EvalBatches(); ++b) {
    const Batch batch = task.GetEval(b);
    EXPECT_EQ(batch.targets.sizes(), (std::vector<int64_t>{4}));
    for (int64_t i = 0; i < 4; ++i) {
      const int64_t label = batch.targets[i].item<int64_t>();
      if (label < 0) {
        ++padding;
        EXPECT_EQ(batch.attention_mask[i].sum().item<int64_t>(), 1);
        continue;
      }
      labels.push_back(label);
      texts.push_back(RowText(batch, i));
    }
  }
  EXPECT_EQ(padding, task.EvalBatches() * 4 - task.held_out_size());
  ASSERT_EQ(static_cast<int64_t>(texts.size()), task.held_out_size());
  for (size_t k = 0; k < texts.size(); ++k) {
    const Document& doc = corpus.documents[task.held_out_documents()[k]];
    EXPECT_EQ(texts[k], doc.text.substr(0, 64));
    EXPECT_EQ(task.class_names()[labels[k]], corpus.categories[doc.category]);
  }
  EXPECT_THROW(task.GetEval(task.EvalBatches()), UserError);
}

TEST(ClassificationTest, TrainBatchesAreDeterministicAndDisjointFromHeldOut) {
  const Corpus corpus = Hand();
  const ClassificationTask task(corpus, Options(3, 64, 6));
  std::set<std::string> held_texts;
  for (int64_t d : task.held_out_documents()) held_texts.insert(corpus.documents[d].text);
  std::set<std::string> seen;
  for (int64_t step = 0; step < 40; ++step) {
    const Batch batch = task.Get(step);
    for (int64_t i = 0; i < 6; ++i) {
      const std::string text = RowText(batch, i);
      EXPECT_FALSE(held_texts.contains(text)) << text;
      const int64_t label = batch.targets[i].item<int64_t>();
      ASSERT_GE(label, 0);
      EXPECT_EQ(text[0], task.class_names()[label][0]);  // text starts with its category
      seen.insert(text);
    }
  }
  EXPECT_GT(static_cast<int64_t>(seen.size()), task.train_size() / 2);  // varied samples
  at::manual_seed(9);
  const ClassificationTask again(corpus, Options(3, 64, 6));
  EXPECT_TRUE(at::equal(task.Get(11).inputs, again.Get(11).inputs));
  EXPECT_TRUE(at::equal(task.Get(11).targets, again.Get(11).targets));
  EXPECT_FALSE(at::equal(task.Get(11).inputs, task.Get(12).inputs));
}

TEST(ClassificationTest, TruncatesAndPadsToSeqLen) {
  std::vector<std::pair<std::string, std::string>> docs;
  for (int i = 0; i < 20; ++i) {
    docs.push_back({"long", std::string(50, 'L')});
    docs.push_back({"short", "hi"});
  }
  const ClassificationTask task(CorpusOf(docs), Options(2, 8, 32));
  const Batch batch = task.Get(0);
  EXPECT_EQ(batch.inputs.sizes(), (std::vector<int64_t>{32, 8}));
  EXPECT_EQ(batch.targets.scalar_type(), at::kLong);
  EXPECT_EQ(batch.attention_mask.scalar_type(), at::kBool);
  for (int64_t i = 0; i < 32; ++i) {
    const std::string name = task.class_names()[batch.targets[i].item<int64_t>()];
    const int64_t real = batch.attention_mask[i].sum().item<int64_t>();
    EXPECT_EQ(real, name == "long" ? 8 : 2);
    EXPECT_EQ(batch.inputs[i].slice(0, real).abs().sum().item<int64_t>(), 0);  // padding 0
    EXPECT_TRUE(batch.attention_mask[i].slice(0, 0, real).all().item<bool>());
  }
}

TEST(ClassificationTest, RejectsBadOptionsAndEmptySplits) {
  const Corpus corpus = Hand();
  EXPECT_THROW(ClassificationTask(corpus, Options(1, 8, 4)), UserError);
  EXPECT_THROW(ClassificationTask(corpus, Options(5, 8, 4)), UserError);
  EXPECT_THROW(ClassificationTask(corpus, Options(3, 0, 4)), UserError);
  EXPECT_THROW(ClassificationTask(corpus, Options(3, 8, 0)), UserError);
  EXPECT_THROW(ClassificationTask(corpus, Options(3, 8, 4, 1.0)), UserError);
  try {
    ClassificationTask(corpus, Options(3, 8, 4, 0.0));
    FAIL() << "an empty held-out split accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("0 held-out examples"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ClassificationTask(corpus, Options(3, 8, 4)).Get(-1), UserError);
}

TEST(ClassificationTest, RealFortunes) {
  if (!FortunesInstalled()) {
    GTEST_SKIP() << kFortunesDir << " is absent: install the Debian package `fortunes`";
  }
  const Corpus corpus = LoadFortunes();
  const ClassificationTask task(corpus, ClassificationOptions{});
  std::cout << "classification:";
  for (const std::string& name : task.class_names()) std::cout << " " << name;
  std::cout << "; " << task.train_size() << " train, " << task.held_out_size()
            << " held out, majority rate " << task.MajorityRate() << "\n";
  EXPECT_EQ(task.class_names().size(), 4u);
  const double share =
      static_cast<double>(task.held_out_size()) / (task.train_size() + task.held_out_size());
  EXPECT_NEAR(share, 0.15, 0.03);
  EXPECT_GT(task.MajorityRate(), 0.25);  // at least 1/K
  EXPECT_LT(task.MajorityRate(), 0.4);   // so a classifier has room to beat it
}

}  // namespace
}  // namespace conveyor
