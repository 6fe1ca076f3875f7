#include "conveyor/formats/tensor_slice.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/common/scratch_folder_testing.h"
#include "conveyor/formats/safetensors.h"
#include "conveyor/nn/tensor_parallel.h"
#include "conveyor/nn/tensor_parallel_split.h"

namespace conveyor {
namespace {

// The plainest source: one safetensors file, its runs read as they are asked for.
class FileSource : public TensorSource {
 public:
  explicit FileSource(const std::string& path) : reader_(path) {
    for (const auto& [name, entry] : reader_.header().tensors) {
      tensors_.emplace(name, StoredTensor{entry.scalar_type, entry.shape});
    }
  }
  const std::map<std::string, StoredTensor>& tensors() const override { return tensors_; }
  std::string Where(const std::string& name) const override { return reader_.path() + ": "; }
  void ReadRuns(const std::string& name, const std::vector<ByteRun>& runs, void* out) override {
    auto* cursor = static_cast<char*>(out);
    for (const ByteRun& run : runs) {
      reader_.ReadBytes(name, run.begin, run.length, cursor);
      cursor += run.length;
    }
  }
  uint64_t bytes_read() const { return reader_.bytes_read(); }

 private:
  SafetensorsReader reader_;
  std::map<std::string, StoredTensor> tensors_;
};

struct Kind {
  const char* name;
  std::vector<int64_t> shape;
  ParameterSpec (*spec)(int tp);
};

// Every way a parameter splits: replicated, along dim 0 (a matrix and a bias), along dim 1,
// three fused blocks, a padded vocabulary (10 rows: 5 / 5 at tp 2, 3 / 3 / 3 / 1 + 2 padding
// at tp 4), key-value heads (2 of them: held by two ranks each at tp 4).
const std::vector<Kind>& Kinds() {
  static const std::vector<Kind> kinds = {
      {"replicated", {6, 8}, [](int) { return ParameterSpec{}; }},
      {"dim0", {8, 6}, [](int) { return ColumnParallel(); }},
      {"dim0_bias", {8}, [](int) { return ColumnParallel(); }},
      {"dim1", {6, 8}, [](int) { return RowParallel(); }},
      {"fused3", {24, 5}, [](int) { return FusedColumnParallel(3); }},
      {"vocab", {10, 4}, [](int) { return VocabParallel(); }},
      {"kv", {12, 4}, [](int tp) { return KeyValueParallel(KvReplicas(2, tp)); }},
  };
  return kinds;
}

class TensorSliceTest : public ::testing::Test {
 protected:
  // Writes every kind's tensor stored as `dtype`; returns them by name.
  std::map<std::string, at::Tensor> Write(at::ScalarType dtype) {
    std::map<std::string, at::Tensor> tensors;
    int64_t first = 0;
    for (const Kind& kind : Kinds()) {
      int64_t numel = 1;
      for (int64_t d : kind.shape) numel *= d;
      // Distinct values, exact in BF16 (small integers).
      tensors[kind.name] =
          (at::arange(first, first + numel, at::kFloat) - 100).view(kind.shape).to(dtype);
      first += numel;
    }
    SaveSafetensors(path_, tensors);
    return tensors;
  }

  ScratchFolder scratch_;
  const std::string path_ = scratch_.Path("t.safetensors");
};

// Every split kind at tp 1, 2 and 4, stored as F32 and BF16: each rank's slice is TakeShard
// of the whole tensor, in fp32, and reading it reads the slice's stored bytes and no others.
TEST_F(TensorSliceTest, EveryRanksSliceIsTakeShardOfTheWholeTensor) {
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    const std::map<std::string, at::Tensor> tensors = Write(dtype);
    FileSource source(path_);
    for (const Kind& kind : Kinds()) {
      for (int tp : {1, 2, 4}) {
        const ParameterSpec spec = kind.spec(tp);
        for (int rank = 0; rank < tp; ++rank) {
          SCOPED_TRACE(std::string(kind.name) + " " + c10::toString(dtype) + " tp " +
                       std::to_string(tp) + " rank " + std::to_string(rank));
          const at::Tensor want =
              TakeShard(tensors.at(kind.name), spec.tp, tp, rank).to(at::kFloat);
          const uint64_t before = source.bytes_read();
          const at::Tensor got = ReadTensorSlice(source, kind.name, spec, tp, rank);
          EXPECT_EQ(got.scalar_type(), at::kFloat);
          EXPECT_TRUE(at::equal(got, want)) << got << want;
          // The real rows alone: a padded slice's zero rows are not read.
          int64_t real = want.numel();
          if (spec.tp.padded && tp > 1) {
            const ShardRows rows = ShardRowsOf(spec.tp, kind.shape[0], tp, rank);
            real = rows.real * kind.shape[1];
          }
          EXPECT_EQ(source.bytes_read() - before,
                    static_cast<uint64_t>(real) * c10::elementSize(dtype));
          // Into a transposed view (a format storing the parameter transposed) alike.
          if (want.dim() == 2) {
            const at::Tensor param = at::full({want.size(1), want.size(0)}, 7.0f);
            ReadTensorSliceInto(source, kind.name, spec, tp, rank, param.t());
            EXPECT_TRUE(at::equal(param.t(), want));
          }
        }
      }
    }
  }
}

// A destination of another shape, a split dimension the tensor lacks and an extent that does
// not split are refused, naming the tensor, and the destination is left as it was.
TEST_F(TensorSliceTest, RefusesWhatDoesNotSplitAndLeavesTheDestination) {
  Write(at::kFloat);
  FileSource source(path_);
  auto expect_refused = [&](const std::function<void()>& read, const std::string& part) {
    try {
      read();
      ADD_FAILURE() << "read; expected a refusal naming " << part;
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path_), std::string::npos) << e.what();
    }
  };
  const at::Tensor dst = at::full({4, 6}, 7.0f);
  expect_refused([&] { ReadTensorSliceInto(source, "dim0", ColumnParallel(), 2, 0, dst.t()); },
                 "tensor 'dim0' gives this rank a part of shape [4, 6]");
  EXPECT_TRUE(at::equal(dst, at::full({4, 6}, 7.0f)));
  expect_refused([&] { ReadTensorSlice(source, "dim0_bias", RowParallel(), 2, 0); },
                 "tensor 'dim0_bias' of shape [8] has no dim 1 to split");
  expect_refused([&] { ReadTensorSlice(source, "dim1", ColumnParallel(), 4, 0); },
                 "tensor 'dim1' does not split into 4 tensor-parallel parts");
}

}  // namespace
}  // namespace conveyor
