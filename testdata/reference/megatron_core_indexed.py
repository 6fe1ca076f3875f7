"""Megatron-Core's own indexed data set (megatron.core.datasets.indexed_dataset: its
IndexedDataset reader and IndexedDatasetBuilder writer), for the tests that check conveyor's
PREFIX.bin / PREFIX.idx against the library Megatron trains with.

  python megatron_core_indexed.py JOB OUT

JOB is a JSON file holding a list of steps, run in order:
  {"write": PREFIX, "vocab": V, "documents": [[[token, ...] per sequence] per document]}
      writes PREFIX.bin / .idx with IndexedDatasetBuilder in DType.optimal_dtype(V) (uint16
      below 65500, int32 above): a document of one sequence with add_item and end_document, a
      document of several with add_document and their lengths (as Megatron's
      tools/preprocess_data.py does with and without --split-sentences)
  {"merge": PREFIX, "inputs": [PREFIX, ...], "vocab": V}
      concatenates the inputs with IndexedDatasetBuilder.add_index (tools/merge_datasets.py)
  {"read": PREFIX}
      reads PREFIX with IndexedDataset
  {"hf_llama": DIR, "vocab": V}
      a model to train such data on: a tiny Llama of V ids (transformers' LlamaForCausalLM,
      2 layers, hidden 32, random weights) saved with save_pretrained into DIR (offline)
OUT receives a JSON list, one entry a step: {} for write, merge and hf_llama; for read
  {"dtype": "uint16" | "int32" | ..., "sequence_lengths": [...], "document_indices": [...],
   "documents": [[[token, ...] per sequence] per document], "stream": [every token, in order]}
where "documents" comes from IndexedDataset.get per sequence and "stream" from one slice of
all sequences (which Megatron reads as one run of PREFIX.bin).
The library's import warnings (no Transformer Engine, no CUDA) go to stderr.
"""
import json
import os
import sys

import numpy
import torch
from megatron.core.datasets.indexed_dataset import DType, IndexedDataset, IndexedDatasetBuilder


def write(prefix, vocab, documents):
    builder = IndexedDatasetBuilder(prefix + ".bin", dtype=DType.optimal_dtype(vocab))
    for document in documents:
        if len(document) == 1:
            builder.add_item(torch.tensor(document[0], dtype=torch.int64))
            builder.end_document()
        else:
            tokens = [token for sequence in document for token in sequence]
            builder.add_document(torch.tensor(tokens, dtype=torch.int64),
                                 [len(sequence) for sequence in document])
    builder.finalize(prefix + ".idx")
    return {}


def merge(prefix, inputs, vocab):
    builder = IndexedDatasetBuilder(prefix + ".bin", dtype=DType.optimal_dtype(vocab))
    for path in inputs:
        builder.add_index(path)
    builder.finalize(prefix + ".idx")
    return {}


def read(prefix):
    data = IndexedDataset(prefix)
    starts = [int(i) for i in data.document_indices]
    documents = [[[int(t) for t in data.get(i)] for i in range(starts[j], starts[j + 1])]
                 for j in range(len(starts) - 1)]
    stream = [int(t) for sequence in data[0:len(data)] for t in sequence] if len(data) else []
    return {"dtype": numpy.dtype(data.index.dtype).name,
            "sequence_lengths": [int(n) for n in data.sequence_lengths],
            "document_indices": starts,
            "documents": documents,
            "stream": stream}


def hf_llama(folder, vocab):
    os.environ["HF_HUB_OFFLINE"] = "1"
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=64, tie_word_embeddings=False)
    LlamaForCausalLM(config).save_pretrained(folder)
    return {}


def main(job_path, out_path):
    with open(job_path) as f:
        job = json.load(f)
    results = []
    for step in job:
        if "write" in step:
            results.append(write(step["write"], step["vocab"], step["documents"]))
        elif "hf_llama" in step:
            results.append(hf_llama(step["hf_llama"], step["vocab"]))
        elif "merge" in step:
            results.append(merge(step["merge"], step["inputs"], step["vocab"]))
        else:
            results.append(read(step["read"]))
    with open(out_path, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
