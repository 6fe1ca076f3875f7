// Evaluation windows over one stream of tokens, with exact semantics, so that anyone can
// reproduce a reported loss: the stream t[0..N-1] is cut into consecutive windows of T
// tokens; window k has inputs t[kT .. kT+T-1] and targets t[kT+1 .. kT+T], for k = 0, 1, ...
// while kT + 1 < N, the last window shorter (its inputs padded with token 0 and its targets
// with -1, which no loss counts). Every token t[1..N-1] is a target exactly once, with every
// token before it in its window as context; the mean next-token loss is over those N - 1
// predictions.
//
// Thread-safety: pure functions.
#ifndef CONVEYOR_DATA_TOKEN_WINDOWS_H_
#define CONVEYOR_DATA_TOKEN_WINDOWS_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "conveyor/data/corpus.h"
#include "conveyor/data/token_source.h"
#include "conveyor/module/microbatch.h"

namespace conveyor {

// The corpus as one stream of byte tokens: its documents in order, each followed by '\n'
// but the last. (N) int64.
at::Tensor CorpusByteStream(const Corpus& corpus);

// Tokenized data (token_source.h) as one stream: its documents in order, each ending with
// its own end-of-document token. (N) int64, read whole into memory. Throws UserError naming
// the document and position of the first token outside [0, vocab_size).
at::Tensor DataSetStream(const TokenSource& data, int64_t vocab_size);

// Each of stream tokens [start, start + count) of `data`: its position in its document,
// counted from `start` on (the first is 0, and each document beginning inside the range
// restarts at 0), as Megatron's reset_position_ids numbers a sample's tokens.
// Precondition: the range is inside the stream.
void WindowPositions(const TokenSource& data, int64_t start, int64_t count, int64_t* out);

// Throws UserError naming `data` when it has no documents of its own to keep apart
// (TokenSource::has_documents: a token file): what --document-mask needs.
void CheckDocumentsToMask(const TokenSource& data);

// What the evaluation of a data set reads besides its tokens, over the same stream of N:
struct StreamMasks {
  at::Tensor targets;        // (N) int64, 1 where the token is a target; undefined: every one
  const TokenSource* documents = nullptr;  // its documents, for document masks; null: none
};

// The windows of `tokens` ((N) int64, N >= 2) of `seq_len` tokens, `batch_size` windows a
// batch (the last batch smaller): inputs and targets (n, seq_len), the targets -1 where
// masks.targets says 0, and with masks.documents the batch's positions (WindowPositions per
// window). UserError for N < 2 or sizes < 1.
std::vector<Batch> NextTokenWindows(const at::Tensor& tokens, int64_t seq_len, int64_t batch_size,
                                    const StreamMasks& masks = {});

// The loss mask of a data set read whole: (N) int64 (ReadLossMask).
at::Tensor LossMaskStream(const TokenSource& mask);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_TOKEN_WINDOWS_H_
