// model_identity (see model_identity.h): metadata keys in sorted order, then
// tensors in sorted name order, all into one XXH3-64 stream.
#include "runtime/model_identity.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include <algorithm>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

namespace tkv::runtime {
namespace {

struct Hasher {
  XXH3_state_t st;
  Hasher() { XXH3_64bits_reset(&st); }
  void bytes(const void* p, size_t n) { XXH3_64bits_update(&st, p, n); }
  template <class T>
  void pod(T v) {
    bytes(&v, sizeof(v));
  }
  void str(const std::string& s) {
    pod<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
};

void hash_value(Hasher& h, const io::GgufValue& v) {
  h.pod(static_cast<uint32_t>(v.type));
  h.pod(static_cast<uint32_t>(v.elem_type));
  h.pod(static_cast<uint64_t>(v.scalar.index()));
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>)
          h.str(x);
        else
          h.pod(x);
      },
      v.scalar);
  h.pod<uint64_t>(v.strings.size());
  for (const auto& s : v.strings) h.str(s);
  h.pod<uint64_t>(v.numbers.size());
  h.bytes(v.numbers.data(), v.numbers.size() * sizeof(double));
}

struct TensorPass {
  const io::GgufFile* g;
  Hasher* h;
};

void hash_tensors(void* arg) {
  auto* t = static_cast<TensorPass*>(arg);
  std::vector<const io::GgufTensorInfo*> ts;
  for (const auto& ti : t->g->tensors()) ts.push_back(&ti);
  std::sort(ts.begin(), ts.end(), [](auto* a, auto* b) { return a->name < b->name; });
  for (const io::GgufTensorInfo* ti : ts) {
    t->h->str(ti->name);
    t->h->pod(static_cast<uint32_t>(ti->type));
    t->h->pod<uint64_t>(ti->shape.size());
    for (int64_t d : ti->shape) t->h->pod(d);
    t->h->pod<uint64_t>(ti->n_bytes);
    t->h->bytes(ti->data, ti->n_bytes);
  }
}

}  // namespace

Result<uint64_t> model_identity(const io::GgufFile& g) {
  Hasher h;
  std::vector<std::string> keys;
  for (const auto& [k, v] : g.metadata())
    if ((k.rfind("general.", 0) != 0 || k == "general.architecture") &&
        k != "tokenizer.chat_template")
      keys.push_back(k);
  std::sort(keys.begin(), keys.end());
  for (const std::string& k : keys) {
    h.str(k);
    hash_value(h, *g.find(k));
  }
  TensorPass pass{&g, &h};
  TKV_RETURN_IF_ERROR(g.guarded_read(&hash_tensors, &pass));
  return static_cast<uint64_t>(XXH3_64bits_digest(&h.st));
}

}  // namespace tkv::runtime
