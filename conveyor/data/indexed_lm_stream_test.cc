#include "conveyor/data/indexed_lm_stream.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/common/scratch_folder_testing.h"
#include "conveyor/data/blended_lm_stream.h"
#include "conveyor/data/data_testing.h"
#include "conveyor/data/indexed_dataset.h"
#include "conveyor/data/open_token_source.h"
#include "conveyor/data/token_windows.h"

namespace conveyor {
namespace {

// 100 documents (WriteCountingDataSet).
std::shared_ptr<const IndexedDataset> Dataset(const std::string& prefix) {
  WriteCountingDataSet(prefix, 100);
  return std::make_shared<const IndexedDataset>(prefix);
}

IndexedLmStreamOptions Options(uint64_t seed) { return SmallStreamOptions(seed); }

class IndexedLmStreamTest : public ::testing::Test {
 protected:
  ScratchFolder scratch_;
  std::shared_ptr<const IndexedDataset> data_ = Dataset(scratch_.Path("set"));
};

// The split is by documents and the same for every seed.
TEST_F(IndexedLmStreamTest, TheSplitIsByDocumentsWhateverTheSeed) {
  const IndexedLmStream a(data_, Options(1)), b(data_, Options(2));
  EXPECT_EQ(a.documents(), (std::array<int64_t, 3>{80, 10, 10}));
  EXPECT_EQ(a.tokens(), b.tokens());
  EXPECT_EQ(a.tokens()[0] + a.tokens()[1] + a.tokens()[2], data_->num_tokens());
  EXPECT_EQ(a.tokens()[0], data_->DocumentOffset(80));
}

// A batch is a function of (seed, step) alone; an epoch visits every train window once, in
// an order of its own; a row is the stream's tokens at its window.
TEST_F(IndexedLmStreamTest, EachEpochVisitsEveryWindowOnceInASeededOrder) {
  const IndexedLmStream stream(data_, Options(7));
  const int64_t t = 8, windows = (stream.tokens()[0] - 1) / t;
  std::set<int64_t> first, second;
  std::vector<int64_t> order[2];
  for (int64_t g = 0; g < 2 * windows; ++g) {
    const int64_t start = stream.TrainWindowStart(g);
    ASSERT_EQ(start % t, 0);
    ASSERT_LE(start + t + 1, stream.tokens()[0]);
    (g < windows ? first : second).insert(start);
    order[g < windows ? 0 : 1].push_back(start);
  }
  EXPECT_EQ(static_cast<int64_t>(first.size()), windows);
  EXPECT_EQ(first, second);
  EXPECT_NE(order[0], order[1]);
  EXPECT_NE(IndexedLmStream(data_, Options(8)).TrainWindowStart(0) +
                IndexedLmStream(data_, Options(8)).TrainWindowStart(1),
            stream.TrainWindowStart(0) + stream.TrainWindowStart(1));
  for (int64_t g = 0; g < 4; ++g) {
    std::vector<int64_t> window(t + 1);
    data_->ReadStream(stream.TrainWindowStart(g), t + 1, window.data());
    EXPECT_EQ(stream.TrainWindow(g).tokens, window);
  }
}

TEST_F(IndexedLmStreamTest, EvaluationTilesTheValidationSplitInOrder) {
  const IndexedLmStream stream(data_, Options(7));
  const int64_t t = 8, windows = (stream.tokens()[1] - 1) / t;
  ASSERT_EQ(stream.EvalWindows(), windows);
  const int64_t start = data_->DocumentOffset(80);
  for (int64_t w = 0; w < windows; ++w) {
    std::vector<int64_t> window(t + 1);
    data_->ReadStream(start + w * t, t + 1, window.data());
    EXPECT_EQ(stream.EvalWindow(w).tokens, window);
  }
  EXPECT_THROW(stream.EvalWindow(windows), UserError);
}

TEST_F(IndexedLmStreamTest, BadDataAndOptionsAreRefused) {
  IndexedLmStreamOptions small = Options(7);
  small.vocab_size = 150;  // tokens go up to 199
  const IndexedLmStream stream(data_, small);
  try {
    for (int64_t g = 0; g < 400; ++g) stream.TrainWindow(g);
    ADD_FAILURE() << "no token refused";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("outside the model's vocabulary [0, 150)"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find(": document "), std::string::npos) << e.what();
  }
  IndexedLmStreamOptions long_window = Options(7);
  long_window.seq_len = 100000;
  EXPECT_THROW(IndexedLmStream(data_, long_window), UserError);
  IndexedLmStreamOptions no_validation = Options(7);
  no_validation.split = {999, 1, 0};  // 0 documents validate
  try {
    IndexedLmStream stream(data_, no_validation);
    ADD_FAILURE() << "accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("the validation split (0 of 100 documents) holds 0"),
              std::string::npos)
        << e.what();
  }
  no_validation.split = {1, 0, 0};  // asked for: nothing evaluated
  EXPECT_EQ(IndexedLmStream(data_, no_validation).EvalWindows(), 0);
  EXPECT_EQ(ParseSplit("969,30,1"), (std::array<double, 3>{969, 30, 1}));
  for (const char* bad : {"1,2", "1,2,3,4", "a,1,1", "0,0,0", "-1,2,3", "1,,2"}) {
    EXPECT_THROW(ParseSplit(bad), UserError) << bad;
  }
}

// Two documents of one token each swapped in the index: valid, but the .bin is no longer
// their concatenation in order.
TEST_F(IndexedLmStreamTest, AStoreThatIsNotTheConcatenationIsRefused) {
  IndexedDatasetWriter writer(scratch_.Path("swapped"), 256);
  for (int64_t j = 0; j < 20; ++j) writer.AddDocument(std::vector<int64_t>{j, j});
  writer.Finish();
  const std::string idx = scratch_.Path("swapped.idx");
  std::string bytes;
  {
    std::ifstream in(idx, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const size_t pointers = 34 + 4 * 20;
  std::swap_ranges(bytes.begin() + pointers, bytes.begin() + pointers + 8,
                   bytes.begin() + pointers + 8);
  std::ofstream(idx, std::ios::binary | std::ios::trunc) << bytes;
  const auto data = std::make_shared<const IndexedDataset>(scratch_.Path("swapped"));
  EXPECT_FALSE(data->contiguous());
  try {
    OpenTokenSource(scratch_.Path("swapped"));
    ADD_FAILURE() << "accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("not stored back to back"), std::string::npos) << e.what();
  }
}

// With a loss mask beside the data set, a window's targets are the stream's next tokens where
// the mask marks them and -1 elsewhere; the batch's count of targets is the mask's.
TEST_F(IndexedLmStreamTest, ALossMaskLeavesOnlyItsTargetsCounted) {
  WriteCountingLossMask(scratch_.Path("set"), 100);
  const std::shared_ptr<const TokenSource> mask = OpenLossMask(scratch_.Path("set"), *data_);
  ASSERT_NE(mask, nullptr);
  EXPECT_EQ(OpenLossMask(scratch_.Path("none"), *data_), nullptr);
  const BlendedLmStream stream(scratch_.Path("set"), Options(3));
  const IndexedLmStream& source = stream.sources()[0];
  ASSERT_TRUE(source.has_loss_mask());
  for (int64_t step = 0; step < 3; ++step) {
    const Batch batch = stream.Get(step);
    int64_t counted = 0;
    for (int64_t i = 0; i < 4; ++i) {
      const int64_t start = source.TrainWindowStart(step * 4 + i);
      std::vector<int64_t> tokens(9), marks(9);
      data_->ReadStream(start, 9, tokens.data());
      mask->ReadStream(start, 9, marks.data());
      for (int64_t t = 0; t < 8; ++t) {
        EXPECT_EQ(batch.targets[i][t].item<int64_t>(), marks[t + 1] ? tokens[t + 1] : -1);
        EXPECT_EQ(batch.inputs[i][t].item<int64_t>(), tokens[t]);
        counted += marks[t + 1];
      }
    }
    EXPECT_EQ(stream.BatchTargets(step), counted);
    EXPECT_LT(counted, 32);
  }
  // Evaluation windows are masked the same way.
  const Batch eval = stream.GetEval(0);
  const LmWindow window = source.EvalWindow(0);
  for (int64_t t = 0; t < 8; ++t) {
    EXPECT_EQ(eval.targets[0][t].item<int64_t>(),
              window.targets[t + 1] ? window.tokens[t + 1] : -1);
  }
}

TEST_F(IndexedLmStreamTest, ALossMaskOfAnotherDataSetOrNotZeroOrOneIsRefused) {
  const std::string other = scratch_.Path("other");
  WriteCountingDataSet(other, 99);
  WriteCountingLossMask(other, 100);
  try {
    OpenLossMask(other, IndexedDataset(other));
    ADD_FAILURE() << "a loss mask of 100 documents accepted for a data set of 99";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("the loss mask is not of this data set"),
              std::string::npos)
        << e.what();
  }
  const std::string bad = scratch_.Path("bad");
  WriteCountingDataSet(bad, 1);
  IndexedDatasetWriter writer(LossMaskPrefix(bad), 4, ByteDtype());
  writer.AddDocument(std::vector<int64_t>{0, 1, 2, 1, 0});
  writer.Finish();
  const auto data = std::make_shared<const IndexedDataset>(bad);
  std::vector<int64_t> out(5);
  try {
    ReadLossMask(*OpenLossMask(bad, *data), 0, 5, out.data());
    ADD_FAILURE() << "a loss mask entry of 2 accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("entry 2 of the loss mask is 2, neither 0 nor 1"),
              std::string::npos)
        << e.what();
  }
}

// With document masks a window carries its tokens' positions in their documents, from the
// window's start; documents of the counting set are 5 + j % 7 tokens long.
TEST_F(IndexedLmStreamTest, DocumentMasksGiveEachTokenItsPositionInItsDocument) {
  IndexedLmStreamOptions options = Options(5);
  options.document_mask = true;
  const IndexedLmStream stream(data_, options);
  for (int64_t g = 0; g < 20; ++g) {
    const int64_t start = stream.TrainWindowStart(g);
    const LmWindow window = stream.TrainWindow(g);
    ASSERT_EQ(window.positions.size(), 9u);
    for (int64_t k = 0; k < 9; ++k) {
      const int64_t j = data_->DocumentAt(start + k);
      const int64_t in_document = start + k - data_->DocumentOffset(j);
      EXPECT_EQ(window.positions[k], std::min(in_document, k)) << "window " << g << ", " << k;
    }
  }
  // Documents 0 (5 tokens) and 1 (6): positions restart where document 1 begins.
  std::vector<int64_t> positions(8);
  WindowPositions(*data_, 2, 8, positions.data());
  EXPECT_EQ(positions, (std::vector<int64_t>{0, 1, 2, 0, 1, 2, 3, 4}));
  EXPECT_TRUE(IndexedLmStream(data_, Options(5)).TrainWindow(0).positions.empty());
  // A batch of such windows has positions; one without document masks has none.
  options.batch_size = 4;
  BlendedLmStream blended(scratch_.Path("set"), options);
  const Batch batch = blended.Get(0);
  ASSERT_TRUE(batch.positions.defined());
  const LmWindow first = blended.sources()[0].TrainWindow(0);
  for (int64_t k = 0; k < 8; ++k) EXPECT_EQ(batch.positions[0][k].item<int64_t>(), first.positions[k]);
  EXPECT_FALSE(BlendedLmStream(scratch_.Path("set"), Options(5)).Get(0).positions.defined());
}

TEST(IndexedLmStreamFlatTest, DocumentMasksRefuseATokenFileWithoutDocuments) {
  ScratchFolder scratch;
  std::vector<uint16_t> tokens(200);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>(i % 50);
  std::ofstream(scratch.Path("flat.bin"), std::ios::binary)
      .write(reinterpret_cast<const char*>(tokens.data()), 2 * tokens.size());
  IndexedLmStreamOptions options = Options(1);
  options.document_mask = true;
  try {
    IndexedLmStream(OpenTokenSource(scratch.Path("flat.bin")), options);
    ADD_FAILURE() << "document masks on a token file accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("without a document index: --document-mask needs"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace conveyor
