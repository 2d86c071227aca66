// Test-only: a tiny, complete llama or gemma3 GGUF (f32 weights, 1-2 layers)
// built in memory, with one knob per hostile-file finding, so the loading
// tests need no model file. Weights are small constants: shapes matter, not values.
#pragma once
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/io/gguf_builder.h"

namespace tkv::testing {

struct TinySpec {
  std::string arch = "llama";  // or "gemma3"
  uint32_t n_layers = 1, d_model = 32, n_heads = 4, n_kv_heads = 2, head_dim = 8, d_ff = 64,
           n_vocab = 16;
  uint64_t block_count = 0;     // 0 = n_layers; else written instead (hostile)
  int64_t rope_dims = -1;       // -1 = absent (head_dim)
  uint64_t sliding_window = 0;  // gemma3 only; 0 = absent
  uint32_t norm_type = 0;       // ggml type id of blk.0.attn_norm.weight (0 = f32, 9 = q8_1)
  bool tokenizer = false;       // a byte-level BPE vocabulary of n_vocab single-letter tokens
};

inline std::vector<uint8_t> f32_bytes(size_t n, float v = 0.01f) {
  std::vector<uint8_t> b(n * sizeof(float));
  for (size_t i = 0; i < n; ++i) std::memcpy(b.data() + i * sizeof(float), &v, sizeof(float));
  return b;
}

inline std::vector<uint8_t> tiny_model(const TinySpec& s) {
  io::testing::GgufBuilder b;
  const std::string a = s.arch + ".";
  b.kv_string("general.architecture", s.arch);
  b.kv(a + "block_count", 10 /*u64*/, s.block_count ? s.block_count : uint64_t{s.n_layers});
  b.kv(a + "embedding_length", 4, s.d_model);
  b.kv(a + "feed_forward_length", 4, s.d_ff);
  b.kv(a + "attention.head_count", 4, s.n_heads);
  b.kv(a + "attention.head_count_kv", 4, s.n_kv_heads);
  b.kv(a + "attention.key_length", 4, s.head_dim);
  b.kv(a + "vocab_size", 4, s.n_vocab);
  if (s.rope_dims >= 0) b.kv(a + "rope.dimension_count", 4, static_cast<uint32_t>(s.rope_dims));
  if (s.sliding_window) b.kv(a + "attention.sliding_window", 10, s.sliding_window);
  if (s.tokenizer) {
    std::vector<std::string> toks;
    for (uint32_t i = 0; i < s.n_vocab; ++i) {
      std::string t = "t";
      t += std::to_string(i);
      toks.push_back(t);
    }
    b.kv_string("tokenizer.ggml.model", "gpt2");
    b.kv_string_array("tokenizer.ggml.tokens", toks);
    b.kv_string_array("tokenizer.ggml.merges", {"t0 t1"});
  }
  const int64_t d = s.d_model, q = int64_t{s.n_heads} * s.head_dim,
                kv = int64_t{s.n_kv_heads} * s.head_dim;
  auto mat = [&](const std::string& name, int64_t n_in, int64_t n_out) {
    b.tensor(name, {n_in, n_out}, 0, f32_bytes(static_cast<size_t>(n_in * n_out)));
  };
  auto vec = [&](const std::string& name, int64_t n) {
    b.tensor(name, {n}, 0, f32_bytes(static_cast<size_t>(n), 1.0f));
  };
  mat("token_embd.weight", d, s.n_vocab);
  vec("output_norm.weight", d);
  for (uint32_t il = 0; il < s.n_layers; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    mat(p + "attn_q.weight", d, q);
    mat(p + "attn_k.weight", d, kv);
    mat(p + "attn_v.weight", d, kv);
    mat(p + "attn_output.weight", q, d);
    mat(p + "ffn_gate.weight", d, s.d_ff);
    mat(p + "ffn_up.weight", d, s.d_ff);
    mat(p + "ffn_down.weight", s.d_ff, d);
    if (il == 0 && s.norm_type == 9) {
      // q8_1: 32 elements per 36-byte block (fp16 d, fp16 s, 32 x int8).
      b.tensor(p + "attn_norm.weight", {d}, 9,
               std::vector<uint8_t>(static_cast<size_t>(d / 32 * 36)));
    } else {
      vec(p + "attn_norm.weight", d);
    }
    vec(p + "ffn_norm.weight", d);
    if (s.arch == "gemma3") {
      vec(p + "attn_q_norm.weight", s.head_dim);
      vec(p + "attn_k_norm.weight", s.head_dim);
      vec(p + "post_attention_norm.weight", d);
      vec(p + "post_ffw_norm.weight", d);
    }
  }
  return b.build();
}

inline std::string write_temp(const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::string p = ::testing::TempDir() + name;
  std::ofstream(p, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  return p;
}

}  // namespace tkv::testing
