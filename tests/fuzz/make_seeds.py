#!/usr/bin/env python3
# Writes the GGUF fuzz seed corpus (tests/fuzz/corpus/*.gguf) with gguf-py's
# GGUFWriter: tiny valid files covering every metadata type, a few tensor types
# and a custom alignment. gguf_test also parses them (an independent writer).
import os

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFWriter

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "gguf_fuzz")


def write(name, fill, alignment=None):
    path = os.path.join(OUT, name)
    w = GGUFWriter(path, "llama")
    if alignment is not None:
        w.add_custom_alignment(alignment)
    fill(w)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(path, os.path.getsize(path))


def scalars(w):
    w.add_uint32("llama.block_count", 2)
    w.add_uint8("t.u8", 7)
    w.add_int8("t.i8", -7)
    w.add_uint16("t.u16", 700)
    w.add_int16("t.i16", -700)
    w.add_int32("t.i32", -70000)
    w.add_float32("t.f32", 0.5)
    w.add_bool("t.bool", True)
    w.add_uint64("t.u64", 1 << 40)
    w.add_int64("t.i64", -(1 << 40))
    w.add_float64("t.f64", 0.25)
    w.add_string("t.str", "hello")
    w.add_array("tokenizer.ggml.tokens", ["<s>", "</s>", "a", "b"])
    w.add_array("tokenizer.ggml.scores", [0.0, -1.0, -2.0, -3.0])
    w.add_tensor("norm.weight", np.arange(8, dtype=np.float32))


def quant(w):
    w.add_uint32("llama.block_count", 1)
    rng = np.random.default_rng(7)
    w.add_tensor("q8.weight", rng.integers(0, 256, size=(2, 34), dtype=np.uint8), raw_dtype=T.Q8_0)
    w.add_tensor("q4k.weight", rng.integers(0, 256, size=(1, 144), dtype=np.uint8), raw_dtype=T.Q4_K)
    w.add_tensor("f16.weight", np.ones((2, 4), dtype=np.float16))


def aligned(w):
    w.add_tensor("a", np.ones(3, dtype=np.float32))
    w.add_tensor("b", np.ones(5, dtype=np.float32))


os.makedirs(OUT, exist_ok=True)
write("scalars.gguf", scalars)
write("quant.gguf", quant)
write("aligned64.gguf", aligned, alignment=64)
