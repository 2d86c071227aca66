// Reader for the llama.cpp logits fixtures (tests/fixtures/logits/README.md):
// token ids, per-position logsumexp and top-k (id, logit), next-token logits.
#pragma once
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace tkv::testing {

struct LogitsFixture {
  uint32_t n_pos = 0, k = 0, n_vocab = 0;
  std::vector<int32_t> ids;       // [n_pos]
  std::vector<float> lse;         // [n_pos]
  std::vector<int32_t> top_id;    // [n_pos, k]
  std::vector<float> top_logit;   // [n_pos, k]
  std::vector<float> next_logit;  // [n_pos]
};

inline bool read_logits_fixture(const std::string& path, LogitsFixture* f) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  char magic[4];
  uint32_t version;
  in.read(magic, 4);
  in.read(reinterpret_cast<char*>(&version), 4);
  if (std::memcmp(magic, "TKLG", 4) != 0 || version != 1) return false;
  in.read(reinterpret_cast<char*>(&f->n_pos), 4);
  in.read(reinterpret_cast<char*>(&f->k), 4);
  in.read(reinterpret_cast<char*>(&f->n_vocab), 4);
  f->ids.resize(f->n_pos);
  in.read(reinterpret_cast<char*>(f->ids.data()), 4 * f->n_pos);
  f->lse.resize(f->n_pos);
  f->top_id.resize(size_t{f->n_pos} * f->k);
  f->top_logit.resize(f->top_id.size());
  for (uint32_t i = 0; i < f->n_pos; ++i) {
    in.read(reinterpret_cast<char*>(&f->lse[i]), 4);
    for (uint32_t j = 0; j < f->k; ++j) {
      in.read(reinterpret_cast<char*>(&f->top_id[size_t{i} * f->k + j]), 4);
      in.read(reinterpret_cast<char*>(&f->top_logit[size_t{i} * f->k + j]), 4);
    }
  }
  f->next_logit.resize(f->n_pos);
  in.read(reinterpret_cast<char*>(f->next_logit.data()), 4 * f->n_pos);
  return static_cast<bool>(in);
}

}  // namespace tkv::testing
