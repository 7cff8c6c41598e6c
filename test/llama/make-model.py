#!/usr/bin/env python3
"""Writes a llama-architecture GGUF model with random weights for the real-server tests: the vocabulary
(and tokenizer settings) copied from a vocabulary-only GGUF, the weights drawn from a fixed seed, so the
same arguments give the same file. It answers gibberish, at the speed of a real model of its shape.

Usage: make-model.py --vocab VOCAB.gguf --out MODEL.gguf [--layers N] [--width N] [--f16]
Needs the `gguf` and `numpy` packages (make-model.sh runs it in a venv that has them)."""
import argparse
import os
import sys

import gguf
import numpy as np

TOKENIZER_KEYS = {  # vocabulary-only GGUF key -> how to write it
    "tokenizer.ggml.model": "add_tokenizer_model",
    "tokenizer.ggml.pre": "add_tokenizer_pre",
    "tokenizer.ggml.tokens": "add_token_list",
    "tokenizer.ggml.scores": "add_token_scores",
    "tokenizer.ggml.token_type": "add_token_types",
    "tokenizer.ggml.bos_token_id": "add_bos_token_id",
    "tokenizer.ggml.eos_token_id": "add_eos_token_id",
    "tokenizer.ggml.unknown_token_id": "add_unk_token_id",
    "tokenizer.ggml.add_bos_token": "add_add_bos_token",
    "tokenizer.ggml.add_eos_token": "add_add_eos_token",
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", required=True, help="a vocabulary-only GGUF (llama architecture)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--f16", action="store_true", help="weights in f16 (default f32)")
    ap.add_argument("--name", default="modelpool-test")
    a = ap.parse_args()
    if a.layers < 1 or a.width < 16 or a.width % 16:
        sys.exit("make-model.py: --layers >= 1 and --width a multiple of 16 (16 per attention head)")

    vocab = gguf.GGUFReader(a.vocab)
    arch = vocab.fields.get("general.architecture")
    if arch is None or arch.contents() != "llama":
        sys.exit(f"make-model.py: {a.vocab} is not a llama-architecture vocabulary")
    tokens = vocab.fields["tokenizer.ggml.tokens"].contents()
    n_vocab, n_embd, n_ff, n_head = len(tokens), a.width, a.width * 4, a.width // 16

    tmp = a.out + ".tmp"
    w = gguf.GGUFWriter(tmp, "llama")
    w.add_name(a.name)
    w.add_context_length(32768)
    w.add_embedding_length(n_embd)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head)
    w.add_rope_dimension_count(n_embd // n_head)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n_vocab)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if a.f16 else gguf.LlamaFileType.ALL_F32)
    for key, add in TOKENIZER_KEYS.items():
        field = vocab.fields.get(key)
        if field is not None:
            getattr(w, add)(field.contents())

    rng = np.random.default_rng(29)
    dtype = np.float16 if a.f16 else np.float32

    def weight(name, rows, cols):
        w.add_tensor(name, (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(dtype))

    def norm(name):
        w.add_tensor(name, np.ones(n_embd, dtype=np.float32))  # norms stay f32, as converters write them

    weight("token_embd.weight", n_vocab, n_embd)
    for i in range(a.layers):
        b = f"blk.{i}."
        norm(b + "attn_norm.weight")
        for t in ("attn_q", "attn_k", "attn_v", "attn_output"):
            weight(b + t + ".weight", n_embd, n_embd)
        norm(b + "ffn_norm.weight")
        weight(b + "ffn_gate.weight", n_ff, n_embd)
        weight(b + "ffn_up.weight", n_ff, n_embd)
        weight(b + "ffn_down.weight", n_embd, n_ff)
    norm("output_norm.weight")
    weight("output.weight", n_vocab, n_embd)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, a.out)


if __name__ == "__main__":
    main()
