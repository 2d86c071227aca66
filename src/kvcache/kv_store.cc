// kv-store: the snapshot byte format (docs/kv-format.md, "Snapshots"): encode,
// decode with every check before use, and the compatibility check against a
// live cache. Little-endian fields (the only hosts we build for); XXH3-64
// checksums over the header and over each page (seeded by the page's index).
#include "kvcache/kv_store.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "kvcache/kv_cache.h"

namespace tkv::kv {
namespace {

constexpr size_t kMaxSchemeLen = 64;
constexpr uint32_t kMaxStores = 64;
constexpr int32_t kMaxDim = 1 << 16;

class Out {
 public:
  template <class T>
  void put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof(T));
  }
  void bytes(const void* p, size_t n) {
    const auto* q = static_cast<const uint8_t*>(p);
    b.insert(b.end(), q, q + n);
  }
  std::vector<uint8_t> b;
};

class In {
 public:
  In(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  template <class T>
  bool get(T* v) {
    if (n_ - pos_ < sizeof(T)) return false;
    std::memcpy(v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool skip(size_t n, const uint8_t** at) {
    if (n_ - pos_ < n) return false;
    *at = p_ + pos_;
    pos_ += n;
    return true;
  }
  size_t pos() const { return pos_; }

 private:
  const uint8_t* p_;
  size_t n_, pos_ = 0;
};

bool in_range(int64_t v, int64_t lo, int64_t hi) {
  return v >= lo && v <= hi;
}

}  // namespace

const char* snapshot_kind_name(int32_t kind) {
  switch (kind) {
    case 0:
      return "bf16";
    case 1:
      return "affine";
    case 2:
      return "turbo";
    case 3:
      return "f16";
    default:
      return "unknown";
  }
}

int64_t snapshot_store_tokens(const SnapshotStore& s, int64_t n_tokens) {
  return std::clamp<int64_t>(n_tokens - s.begin, 0, s.end - s.begin);
}

int64_t snapshot_page_bytes(const SnapshotHeader& h, const SnapshotStore& s, int64_t n_tokens,
                            int64_t page) {
  const int64_t rows =
      std::min<int64_t>(h.page_size, snapshot_store_tokens(s, n_tokens) - page * h.page_size);
  return int64_t{h.n_kv_heads} * rows * s.row_bytes;
}

const uint8_t* Snapshot::page(size_t s, int l, int64_t p, int64_t* n_bytes) const {
  const size_t i = store_first_page[s] + static_cast<size_t>(l * store_pages[s] + p);
  *n_bytes = page_offset[i + 1] - page_offset[i];
  return data.data() + page_offset[i];
}

Result<std::vector<uint8_t>> encode_snapshot(const SnapshotHeader& h,
                                             const std::vector<std::vector<uint8_t>>& pages) {
  if (h.scheme.size() > kMaxSchemeLen)
    return invalid_argument("[kv-store] scheme name '{}' too long", h.scheme);
  Out o;
  o.bytes(kSnapshotMagic, sizeof(kSnapshotMagic));
  o.put<uint32_t>(h.version);
  o.put<uint32_t>(0);  // header_bytes, patched below
  o.put<uint64_t>(h.model_id);
  o.put<uint32_t>(static_cast<uint32_t>(h.scheme.size()));
  o.bytes(h.scheme.data(), h.scheme.size());
  for (int32_t v : {h.kind, h.k_bits, h.v_bits, h.head_dim, h.n_layers, h.n_kv_heads, h.page_size})
    o.put<int32_t>(v);
  o.put<uint8_t>(h.key_center ? 1 : 0);
  o.put<uint8_t>(h.swa_bf16 ? 1 : 0);
  o.put<uint16_t>(0);
  o.put<int64_t>(h.quant_start);
  o.put<uint32_t>(static_cast<uint32_t>(h.stores.size()));
  for (const SnapshotStore& s : h.stores) {
    o.put<int64_t>(s.begin);
    o.put<int64_t>(s.end);
    for (int32_t v : {s.n_layers, s.row_bytes, s.kind, s.k_bits, s.v_bits}) o.put<int32_t>(v);
  }
  o.put<int64_t>(h.n_tokens());
  o.bytes(h.tokens.data(), h.tokens.size() * sizeof(int32_t));
  const auto header_bytes = static_cast<uint32_t>(o.b.size());
  std::memcpy(o.b.data() + 12, &header_bytes, sizeof(header_bytes));
  o.put<uint64_t>(XXH3_64bits(o.b.data(), header_bytes));
  size_t i = 0;
  for (size_t s = 0; s < h.stores.size(); ++s) {
    const int64_t n_pages =
        (snapshot_store_tokens(h.stores[s], h.n_tokens()) + h.page_size - 1) / h.page_size;
    for (int l = 0; l < h.stores[s].n_layers; ++l) {
      for (int64_t p = 0; p < n_pages; ++p, ++i) {
        if (i >= pages.size() || static_cast<int64_t>(pages[i].size()) !=
                                     snapshot_page_bytes(h, h.stores[s], h.n_tokens(), p))
          return invalid_argument(
              "[kv-store] page {} (store {}, layer {}, page {}) has the wrong size", i, s, l, p);
        o.bytes(pages[i].data(), pages[i].size());
        o.put<uint64_t>(XXH3_64bits_withSeed(pages[i].data(), pages[i].size(), i));
      }
    }
  }
  if (i != pages.size())
    return invalid_argument("[kv-store] {} pages given, {} expected", pages.size(), i);
  return std::move(o.b);
}

Result<SnapshotHeader> decode_snapshot_header(const uint8_t* bytes, size_t size,
                                              const std::string& label, size_t* header_end) {
  In in(bytes, size);
  const uint8_t* magic = nullptr;
  if (!in.skip(sizeof(kSnapshotMagic), &magic))
    return invalid_argument("[kv-store] {}: truncated snapshot ({} bytes, not even a header)",
                            label, size);
  if (std::memcmp(magic, kSnapshotMagic, sizeof(kSnapshotMagic)) != 0)
    return invalid_argument("[kv-store] {}: not a turbokv KV snapshot (magic is not TKVSNAP)",
                            label);
  SnapshotHeader h;
  uint32_t header_bytes = 0;
  if (!in.get(&h.version) || !in.get(&header_bytes))
    return invalid_argument("[kv-store] {}: truncated snapshot header", label);
  if (h.version != kSnapshotVersion)
    return invalid_argument(
        "[kv-store] {}: snapshot format version {}, this build reads version {}", label, h.version,
        kSnapshotVersion);
  if (header_bytes < 16 || size < size_t{header_bytes} + 8)
    return invalid_argument(
        "[kv-store] {}: truncated snapshot: the header needs {} bytes, the file has {}", label,
        size_t{header_bytes} + 8, size);
  uint64_t sum = 0;
  std::memcpy(&sum, bytes + header_bytes, sizeof(sum));
  const uint64_t want = XXH3_64bits(bytes, header_bytes);
  if (sum != want)
    return invalid_argument(
        "[kv-store] {}: header checksum mismatch (stored {:016x}, computed {:016x}): the file is "
        "corrupt",
        label, sum, want);
  In hd(bytes, header_bytes);
  const uint8_t* skip = nullptr;
  hd.skip(16, &skip);
  const auto bad = [&](const char* what) {
    return invalid_argument("[kv-store] {}: malformed snapshot header ({})", label, what);
  };
  uint32_t scheme_len = 0;
  if (!hd.get(&h.model_id) || !hd.get(&scheme_len) || scheme_len > kMaxSchemeLen)
    return bad("scheme name");
  const uint8_t* sp = nullptr;
  if (!hd.skip(scheme_len, &sp)) return bad("scheme name");
  h.scheme.assign(reinterpret_cast<const char*>(sp), scheme_len);
  uint8_t kc = 0, swa = 0;
  uint16_t pad = 0;
  uint32_t n_stores = 0;
  if (!hd.get(&h.kind) || !hd.get(&h.k_bits) || !hd.get(&h.v_bits) || !hd.get(&h.head_dim) ||
      !hd.get(&h.n_layers) || !hd.get(&h.n_kv_heads) || !hd.get(&h.page_size) || !hd.get(&kc) ||
      !hd.get(&swa) || !hd.get(&pad) || !hd.get(&h.quant_start) || !hd.get(&n_stores))
    return bad("fields");
  h.key_center = kc != 0;
  h.swa_bf16 = swa != 0;
  if (!in_range(h.head_dim, 1, kMaxDim) || !in_range(h.n_layers, 1, kMaxDim) ||
      !in_range(h.n_kv_heads, 1, kMaxDim) || !in_range(h.page_size, 1, kMaxDim) ||
      !in_range(h.quant_start, 0, kMaxCacheTokens) || n_stores < 1 || n_stores > kMaxStores)
    return bad("shape out of range");
  for (uint32_t i = 0; i < n_stores; ++i) {
    SnapshotStore s;
    if (!hd.get(&s.begin) || !hd.get(&s.end) || !hd.get(&s.n_layers) || !hd.get(&s.row_bytes) ||
        !hd.get(&s.kind) || !hd.get(&s.k_bits) || !hd.get(&s.v_bits))
      return bad("stores");
    if (s.begin < 0 || s.end <= s.begin || !in_range(s.n_layers, 1, h.n_layers) ||
        !in_range(s.row_bytes, 1, 1 << 20))
      return bad("store out of range");
    h.stores.push_back(s);
  }
  int64_t n_tokens = 0;
  if (!hd.get(&n_tokens) || !in_range(n_tokens, 0, kMaxCacheTokens)) return bad("token count");
  const uint8_t* tp = nullptr;
  if (!hd.skip(static_cast<size_t>(n_tokens) * sizeof(int32_t), &tp)) return bad("tokens");
  if (hd.pos() != header_bytes) return bad("trailing header bytes");
  h.tokens.resize(static_cast<size_t>(n_tokens));
  if (n_tokens > 0) std::memcpy(h.tokens.data(), tp, h.tokens.size() * sizeof(int32_t));
  *header_end = size_t{header_bytes} + 8;
  return h;
}

Result<Snapshot> decode_snapshot(const uint8_t* bytes, size_t size, const std::string& label) {
  Snapshot snap;
  size_t pos = 0;
  TKV_ASSIGN_OR_RETURN(snap.header, decode_snapshot_header(bytes, size, label, &pos));
  const SnapshotHeader& h = snap.header;
  // Sizes first (bounded by the file size, so nothing overflows or over-allocates).
  std::vector<int64_t> sizes;
  uint64_t need = pos;
  for (const SnapshotStore& s : h.stores) {
    snap.store_first_page.push_back(sizes.size());
    const int64_t n_pages =
        (snapshot_store_tokens(s, h.n_tokens()) + h.page_size - 1) / h.page_size;
    snap.store_pages.push_back(n_pages);
    for (int l = 0; l < s.n_layers; ++l) {
      for (int64_t p = 0; p < n_pages; ++p) {
        const int64_t b = snapshot_page_bytes(h, s, h.n_tokens(), p);
        need += static_cast<uint64_t>(b) + 8;
        if (need > size)
          return invalid_argument(
              "[kv-store] {}: truncated snapshot: {} bytes, the pages of {} tokens need more",
              label, size, h.n_tokens());
        sizes.push_back(b);
      }
    }
  }
  if (need != size)
    return invalid_argument("[kv-store] {}: {} bytes past the end of the snapshot ({} expected)",
                            label, size - need, need);
  snap.data.reserve(static_cast<size_t>(need - pos - 8 * sizes.size()));
  snap.page_offset.push_back(0);
  for (size_t i = 0; i < sizes.size(); ++i) {
    const uint8_t* p = bytes + pos;
    const auto n = static_cast<size_t>(sizes[i]);
    uint64_t sum = 0;
    std::memcpy(&sum, p + n, sizeof(sum));
    if (sum != XXH3_64bits_withSeed(p, n, i))
      return invalid_argument(
          "[kv-store] {}: page {} of {} fails its checksum: the file is corrupt", label, i,
          sizes.size());
    snap.data.insert(snap.data.end(), p, p + n);
    snap.page_offset.push_back(static_cast<int64_t>(snap.data.size()));
    pos += n + 8;
  }
  return snap;
}

void reseal_snapshot(std::vector<uint8_t>* b) {
  uint32_t header_bytes = 0;
  if (b->size() < 16) return;
  std::memcpy(&header_bytes, b->data() + 12, sizeof(header_bytes));
  if (header_bytes < 16 || b->size() < size_t{header_bytes} + 8) return;
  const uint64_t sum = XXH3_64bits(b->data(), header_bytes);
  std::memcpy(b->data() + header_bytes, &sum, sizeof(sum));
  size_t pos = 0;
  auto h = decode_snapshot_header(b->data(), b->size(), "reseal", &pos);
  if (!h.ok()) return;
  size_t i = 0;
  for (const SnapshotStore& s : h.value().stores) {
    const int64_t n_pages =
        (snapshot_store_tokens(s, h.value().n_tokens()) + h.value().page_size - 1) /
        h.value().page_size;
    for (int l = 0; l < s.n_layers; ++l) {
      for (int64_t p = 0; p < n_pages; ++p, ++i) {
        const auto n =
            static_cast<size_t>(snapshot_page_bytes(h.value(), s, h.value().n_tokens(), p));
        if (b->size() - pos < n + 8) return;
        const uint64_t ps = XXH3_64bits_withSeed(b->data() + pos, n, i);
        std::memcpy(b->data() + pos + n, &ps, sizeof(ps));
        pos += n + 8;
      }
    }
  }
}

Status check_snapshot_compatible(const SnapshotHeader& s, const SnapshotHeader& m,
                                 const std::string& label) {
  const auto refuse = [&](const std::string& what, const std::string& theirs,
                          const std::string& ours) {
    return invalid_argument("[kv-store] {}: snapshot is for {} {}, this engine runs {}", label,
                            what, theirs, ours);
  };
  if (s.model_id != m.model_id)
    return refuse("model", fmt::format("{:016x}", s.model_id),
                  fmt::format("{:016x} (another model file or weights)", m.model_id));
  if (s.kind != m.kind)
    return refuse("scheme", s.scheme + " (" + snapshot_kind_name(s.kind) + ")",
                  m.scheme + " (" + snapshot_kind_name(m.kind) + ")");
  if (s.k_bits != m.k_bits || s.v_bits != m.v_bits)
    return refuse("bits", fmt::format("k{}v{} ({})", s.k_bits, s.v_bits, s.scheme),
                  fmt::format("k{}v{} ({})", m.k_bits, m.v_bits, m.scheme));
  if (s.scheme != m.scheme) return refuse("scheme", s.scheme, m.scheme);
  if (s.head_dim != m.head_dim || s.n_layers != m.n_layers || s.n_kv_heads != m.n_kv_heads)
    return refuse(
        "shape",
        fmt::format("layers {} kv heads {} head_dim {}", s.n_layers, s.n_kv_heads, s.head_dim),
        fmt::format("layers {} kv heads {} head_dim {}", m.n_layers, m.n_kv_heads, m.head_dim));
  if (s.page_size != m.page_size)
    return refuse("page size", std::to_string(s.page_size), std::to_string(m.page_size));
  if (s.key_center != m.key_center)
    return refuse("key centering", s.key_center ? "on" : "off", m.key_center ? "on" : "off");
  if (s.quant_start != m.quant_start)
    return refuse("quant_start", std::to_string(s.quant_start), std::to_string(m.quant_start));
  if (s.swa_bf16 != m.swa_bf16)
    return refuse("sliding-window format", s.swa_bf16 ? "bf16" : "quant",
                  m.swa_bf16 ? "bf16" : "quant");
  if (s.stores != m.stores)
    return invalid_argument("[kv-store] {}: snapshot's store layout differs from this engine's",
                            label);
  return Status();
}

}  // namespace tkv::kv
