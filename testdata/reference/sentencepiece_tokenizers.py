"""A SentencePiece model as the Python sentencepiece library and transformers' Llama tokenizer
see it, for the tests that check conveyor's tokenizer against the libraries users run.

  python sentencepiece_tokenizers.py FOLDER JOB OUT

FOLDER holds tokenizer.model. JOB is a JSON file {"texts": [text, ...], "ids": [[id, ...],
...]} (the ids conveyor gave each text); OUT receives
  {"sentencepiece": {"vocab_size", "bos", "eos", "unk",
                     "encode": [ids of each text],
                     "decode": [text of each of JOB's id lists]},
   "transformers": {...the same, from LlamaTokenizer.from_pretrained(FOLDER), which converts
                    the model to a tokenizers BPE; encode without special ids; "bos_added":
                    whether encode with special ids starts with the BOS id}}
or, with --no-transformers, only "sentencepiece" (for models transformers' Llama tokenizer does
not take: unigram). Offline (HF_HUB_OFFLINE=1).
"""
import json
import os
import sys

os.environ["HF_HUB_OFFLINE"] = "1"

import sentencepiece  # noqa: E402


def with_sentencepiece(folder, texts, ids):
    processor = sentencepiece.SentencePieceProcessor(
        model_file=os.path.join(folder, "tokenizer.model"))
    return {"vocab_size": processor.vocab_size(), "bos": processor.bos_id(),
            "eos": processor.eos_id(), "unk": processor.unk_id(),
            "encode": [processor.encode(text) for text in texts],
            "decode": [processor.decode(each) for each in ids]}


def with_transformers(folder, texts, ids):
    from transformers import LlamaTokenizer
    tokenizer = LlamaTokenizer.from_pretrained(folder)
    return {"vocab_size": len(tokenizer), "bos": tokenizer.bos_token_id,
            "eos": tokenizer.eos_token_id, "unk": tokenizer.unk_token_id,
            "encode": [tokenizer.encode(text, add_special_tokens=False) for text in texts],
            "decode": [tokenizer.decode(each) for each in ids],
            "bos_added": tokenizer.encode("a")[:1] == [tokenizer.bos_token_id]}


def main(args):
    use_transformers = "--no-transformers" not in args
    folder, job_path, out_path = [a for a in args if a != "--no-transformers"]
    with open(job_path, encoding="utf-8") as f:
        job = json.load(f)
    out = {"sentencepiece": with_sentencepiece(folder, job["texts"], job["ids"])}
    if use_transformers:
        out["transformers"] = with_transformers(folder, job["texts"], job["ids"])
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)


if __name__ == "__main__":
    main(sys.argv[1:])
