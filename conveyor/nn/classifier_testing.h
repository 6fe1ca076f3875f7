// Test support for the classifier: a small configuration and micro-batches with padding.
#ifndef CONVEYOR_NN_CLASSIFIER_TESTING_H_
#define CONVEYOR_NN_CLASSIFIER_TESTING_H_

#include <ATen/ATen.h>

#include <cstdint>

#include "conveyor/nn/classifier.h"
#include "conveyor/nn/layer.h"

namespace conveyor {

inline ClassifierConfig SmallClassifier() {
  ClassifierConfig c;
  c.vocab = 16;
  c.hidden = 16;
  c.heads = 2;
  c.layers = 3;
  c.max_seq_len = 12;
  c.classes = 3;
  return c;
}

// n samples of length t, sample i with 1 + (i % t) real tokens, random classes.
inline MicroBatch ClassifierMicroBatch(const ClassifierConfig& c, int64_t n, int64_t t,
                                       uint64_t seed) {
  at::Generator gen = LayerInitGenerator(seed, 1000);
  MicroBatch mb;
  mb.inputs = at::randint(c.vocab, {n, t}, gen, at::kLong);
  mb.targets = at::randint(c.classes, {n}, gen, at::kLong);
  mb.attention_mask = at::ones({n, t}, at::kBool);
  for (int64_t i = 0; i < n; ++i)
    mb.attention_mask[i].narrow(0, 1 + i % t, t - 1 - i % t).fill_(false);
  return mb;
}

}  // namespace conveyor

#endif  // CONVEYOR_NN_CLASSIFIER_TESTING_H_
