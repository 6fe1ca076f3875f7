// The C interface of conveyor's SentencePiece plugin (plugins/sentencepiece/), a shared
// object of its own that sentencepiece_tokenizer.cc loads at first use.
//
// Why a plugin: Debian's libsentencepiece carries its own copy of protobuf-lite under
// protobuf's symbol names, and libtorch loads the full libprotobuf; in one symbol scope
// each library's calls bind to the other's copy and the process crashes at load or at the
// first model parsed. The plugin is loaded with RTLD_DEEPBIND: libsentencepiece and its
// protobuf resolve against each other first, libtorch's libprotobuf never sees them.
//
// Every function is C: no C++ object crosses the boundary. Results come back through a
// sink the caller passes; errors as text through `error` (a buffer of error_size bytes,
// always terminated). Functions returning int return 0 on success.
#ifndef CONVEYOR_DATA_SENTENCEPIECE_PLUGIN_H_
#define CONVEYOR_DATA_SENTENCEPIECE_PLUGIN_H_

#include <cstddef>
#include <cstdint>

extern "C" {

struct ConveyorSpm;  // a loaded model, owned by the plugin

// Receives results: `size` ids (int32) or bytes at `data`, appended to what `sink_state`
// holds.
typedef void (*ConveyorSpmSink)(void* sink_state, const void* data, size_t size);

// The model at `path`, or null with the reason in `error`. Free with conveyor_spm_free.
typedef ConveyorSpm* (*ConveyorSpmLoad)(const char* path, char* error, size_t error_size);
typedef void (*ConveyorSpmFree)(ConveyorSpm* model);
// What = 0: the vocabulary size; 1: BOS id; 2: EOS id (-1 when none).
typedef int64_t (*ConveyorSpmInfo)(const ConveyorSpm* model, int what);
// The ids of `size` bytes of text, as int32 into `sink`.
typedef int (*ConveyorSpmEncode)(const ConveyorSpm* model, const char* text, size_t size,
                                 ConveyorSpmSink sink, void* sink_state, char* error,
                                 size_t error_size);
// The text of `count` ids, as bytes into `sink`.
typedef int (*ConveyorSpmDecode)(const ConveyorSpm* model, const int32_t* ids, size_t count,
                                 ConveyorSpmSink sink, void* sink_state, char* error,
                                 size_t error_size);
// Trains a model: `num_options` key/value pairs of the trainer's options, `num_sentences`
// sentences (sentences[i] of lengths[i] bytes); the serialized model as bytes into `sink`.
typedef int (*ConveyorSpmTrain)(const char* const* keys, const char* const* values,
                                size_t num_options, const char* const* sentences,
                                const size_t* lengths, size_t num_sentences, ConveyorSpmSink sink,
                                void* sink_state, char* error, size_t error_size);

}  // extern "C"

#endif  // CONVEYOR_DATA_SENTENCEPIECE_PLUGIN_H_
