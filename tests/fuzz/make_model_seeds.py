#!/usr/bin/env python3
# Writes the model_load_fuzz seed corpus (tests/fuzz/corpus/model_load_fuzz/):
# one tiny valid model per supported architecture (llama, qwen2, gemma3):
# d_model 64, 1 layer, 2 query heads of 32 over 1 KV head, d_ff 64, Q8_0
# matrices, f32 vectors, and a small vocabulary (byte-level BPE for llama and
# qwen2, SentencePiece with byte fallback for gemma3). Plain struct packing per
# ggml/docs/gguf.md (no gguf-py needed); deterministic; each file < 100 KB.
import os
import random
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "model_load_fuzz")
ALIGN = 32
U32, I32, F32, BOOL, STR, ARR, U64 = 4, 5, 6, 7, 8, 9, 10
T_F32, T_Q8_0 = 0, 8
D, DFF, NH, NKV, HD = 64, 64, 2, 1, 32


def s(x):
    b = x.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, typ, val):
    out = s(key) + struct.pack("<I", typ)
    if typ == STR:
        return out + s(val)
    if typ == ARR:
        et, items = val
        out += struct.pack("<IQ", et, len(items))
        fmt = {I32: "<i", F32: "<f", U32: "<I"}.get(et)
        return out + b"".join(s(i) if et == STR else struct.pack(fmt, i) for i in items)
    fmt = {U32: "<I", I32: "<i", F32: "<f", BOOL: "<B", U64: "<Q"}[typ]
    return out + struct.pack(fmt, val)


def q8_0(rng, n):
    # blocks of 32: f16 scale, 32 int8 (values ~ +-0.02)
    return b"".join(struct.pack("<e", 0.02 / 127) + bytes(rng.randrange(256) for _ in range(32))
                    for _ in range(n // 32))


def f32(values):
    return struct.pack(f"<{len(values)}f", *values)


def gpt2_vocab():
    bs = [b for b in range(256) if 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255]
    extra = iter(range(256, 512))
    chars = {b: (chr(b) if b in bs else chr(next(extra))) for b in range(256)}
    tokens = [chars[b] for b in range(256)]
    merges = ["Ġ t", "h e", "Ġt he", "i n", "Ġ a"]
    tokens += [m.replace(" ", "") for m in merges]
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    types = [1] * len(tokens) + [3] * len(specials)
    tokens += specials
    n = len(tokens)
    return [
        kv("tokenizer.ggml.model", STR, "gpt2"),
        kv("tokenizer.ggml.tokens", ARR, (STR, tokens)),
        kv("tokenizer.ggml.token_type", ARR, (I32, types)),
        kv("tokenizer.ggml.merges", ARR, (STR, merges)),
        kv("tokenizer.ggml.bos_token_id", U32, n - 3),
        kv("tokenizer.ggml.eos_token_id", U32, n - 1),
        kv("tokenizer.chat_template", STR, "{% for m in messages %}<|im_start|>{{ m.role }}\n"),
    ], n


def spm_vocab():
    tokens = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
    types = [3, 3, 3, 2, 3, 3]
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [6] * 256
    pieces = ["▁", "a", "b", "e", "h", "t", "▁t", "he", "▁the"]
    tokens += pieces
    types += [1] * len(pieces)
    scores = [0.0] * (len(tokens) - len(pieces)) + [-float(i) for i in range(1, len(pieces) + 1)]
    return [
        kv("tokenizer.ggml.model", STR, "llama"),
        kv("tokenizer.ggml.pre", STR, "default"),
        kv("tokenizer.ggml.tokens", ARR, (STR, tokens)),
        kv("tokenizer.ggml.token_type", ARR, (I32, types)),
        kv("tokenizer.ggml.scores", ARR, (F32, scores)),
        kv("tokenizer.ggml.bos_token_id", U32, 2),
        kv("tokenizer.ggml.eos_token_id", U32, 1),
        kv("tokenizer.ggml.unknown_token_id", U32, 3),
        kv("tokenizer.ggml.add_bos_token", BOOL, 1),
    ], len(tokens)


def model(arch, n_layers=1):
    rng = random.Random(arch)
    vocab_kvs, n_vocab = spm_vocab() if arch == "gemma3" else gpt2_vocab()
    kvs = [kv("general.architecture", STR, arch), kv("general.alignment", U32, ALIGN)]
    kvs += [kv(f"{arch}.block_count", U32, n_layers), kv(f"{arch}.embedding_length", U32, D),
            kv(f"{arch}.feed_forward_length", U32, DFF), kv(f"{arch}.attention.head_count", U32, NH),
            kv(f"{arch}.attention.head_count_kv", U32, NKV), kv(f"{arch}.attention.key_length", U32, HD),
            kv(f"{arch}.attention.value_length", U32, HD), kv(f"{arch}.context_length", U32, 256),
            kv(f"{arch}.attention.layer_norm_rms_epsilon", F32, 1e-6), kv(f"{arch}.rope.freq_base", F32, 10000.0)]
    if arch == "gemma3":
        kvs.append(kv("gemma3.attention.sliding_window", U32, 32))
    kvs += vocab_kvs
    ones = lambda n: (T_F32, [n], f32([1.0] * n))
    mat = lambda cols, rows: (T_Q8_0, [cols, rows], q8_0(rng, cols * rows))
    tensors = [("token_embd.weight", mat(D, n_vocab)), ("output_norm.weight", ones(D))]
    for il in range(n_layers):
        p = f"blk.{il}."
        tensors += [(p + "attn_q.weight", mat(D, NH * HD)), (p + "attn_k.weight", mat(D, NKV * HD)),
                    (p + "attn_v.weight", mat(D, NKV * HD)), (p + "attn_output.weight", mat(NH * HD, D)),
                    (p + "ffn_gate.weight", mat(D, DFF)), (p + "ffn_up.weight", mat(D, DFF)),
                    (p + "ffn_down.weight", mat(DFF, D)), (p + "attn_norm.weight", ones(D)),
                    (p + "ffn_norm.weight", ones(D))]
        if arch == "qwen2":
            tensors += [(p + "attn_q.bias", (T_F32, [NH * HD], f32([0.01] * (NH * HD)))),
                        (p + "attn_k.bias", (T_F32, [NKV * HD], f32([0.5] * (NKV * HD)))),
                        (p + "attn_v.bias", (T_F32, [NKV * HD], f32([0.0] * (NKV * HD))))]
        if arch == "gemma3":
            tensors += [(p + "attn_q_norm.weight", ones(HD)), (p + "attn_k_norm.weight", ones(HD)),
                        (p + "post_attention_norm.weight", ones(D)), (p + "post_ffw_norm.weight", ones(D))]
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs)
    data, infos = b"", b""
    for name, (typ, dims, raw) in tensors:
        infos += s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        infos += struct.pack("<IQ", typ, len(data))
        data += raw + b"\0" * (-len(raw) % ALIGN)
    out = head + infos
    return out + b"\0" * (-len(out) % ALIGN) + data


os.makedirs(OUT, exist_ok=True)
for arch, layers in [("llama", 1), ("qwen2", 1), ("gemma3", 2)]:
    path = os.path.join(OUT, f"{arch}.gguf")
    with open(path, "wb") as f:
        f.write(model(arch, layers))
    print(path, os.path.getsize(path))
