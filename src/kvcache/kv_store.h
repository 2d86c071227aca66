// kv-store: KV snapshots on disk (docs/kv-format.md, "Snapshots"). A snapshot is
// one sequence's KV pages exactly as the cache stores them (no re-encoding), the
// token ids they hold and everything that decides those bytes (model identity,
// scheme, bits, shapes, page size, key centering, quant_start, swa format).
// Reading validates the whole file (magic, version, every checksum, sizes)
// before anything uses it; writing is atomic (temp file, fsync, rename, fsync dir).
// The snapshot is a "prefix source" like the in-memory prefix cache: slot
// save/restore and the disk prompt cache reuse these types.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace tkv::kv {

inline constexpr char kSnapshotMagic[8] = {'T', 'K', 'V', 'S', 'N', 'A', 'P', '\0'};
inline constexpr uint32_t kSnapshotVersion = 1;

// One store of the cache layout (kv_layout.h): positions [begin, end) of the
// layers of one group, rows of row_bytes per (token, kv head).
struct SnapshotStore {
  int64_t begin = 0, end = 0;  // positions; end = kNoEnd for the open-ended store
  int32_t n_layers = 0;        // layers of its group (one page per layer per page slot)
  int32_t row_bytes = 0;
  int32_t kind = 0;  // quant::KvKind of this store (a bf16 prefix store is bf16)
  int32_t k_bits = 16, v_bits = 16;
  bool operator==(const SnapshotStore&) const = default;
};

// Everything a snapshot's bytes depend on, plus its tokens.
struct SnapshotHeader {
  uint32_t version = kSnapshotVersion;
  uint64_t model_id = 0;  // runtime::model_identity: tensor data + forward metadata
  std::string scheme;     // the cache's scheme_name(): "bf16", "turbo:k8v3", "affine8+bf16<64"
  int32_t kind = 0;       // quant::KvKind of the scheme store
  int32_t k_bits = 16, v_bits = 16;
  int32_t head_dim = 0, n_layers = 0, n_kv_heads = 0, page_size = 0;
  bool key_center = false;
  int64_t quant_start = 0;
  bool swa_bf16 = false;
  std::vector<SnapshotStore> stores;
  std::vector<int32_t> tokens;  // [n_tokens] the tokens whose KV the pages hold
  int64_t n_tokens() const { return static_cast<int64_t>(tokens.size()); }
};

// "bf16" | "f16" | "affine" | "turbo" for a quant::KvKind value.
const char* snapshot_kind_name(int32_t kind);

// Tokens store s holds of a sequence of n tokens, and its page count / rows of
// the last page (the page order of the file: store, layer of its group, page).
int64_t snapshot_store_tokens(const SnapshotStore& s, int64_t n_tokens);
// Bytes of page p of store s for a sequence of n tokens: n_kv_heads × rows × row_bytes.
int64_t snapshot_page_bytes(const SnapshotHeader& h, const SnapshotStore& s, int64_t n_tokens,
                            int64_t page);

// A snapshot in memory: the parsed header and its pages in file order, each
// [n_kv_heads, rows, row_bytes] (rows = the page's tokens, page_size but the last).
struct Snapshot {
  SnapshotHeader header;
  std::vector<uint8_t> data;         // the page bytes, concatenated
  std::vector<int64_t> page_offset;  // [n_pages + 1] into data
  // Store s, layer slot l, page p (file order), as a byte range of data.
  const uint8_t* page(size_t s, int l, int64_t p, int64_t* n_bytes) const;
  std::vector<size_t> store_first_page;  // [stores] index of (s, 0, 0) in page_offset
  std::vector<int64_t> store_pages;      // [stores] pages per layer of store s
};

// Serializes header + pages (pages in file order, sizes as snapshot_page_bytes says).
Result<std::vector<uint8_t>> encode_snapshot(const SnapshotHeader& h,
                                             const std::vector<std::vector<uint8_t>>& pages);
// Parses and checks a whole file image: magic, version, header checksum, sizes,
// every page checksum, trailing bytes. Errors start with "[kv-store]" and name
// what was expected and what was found. `label` names the file in messages.
Result<Snapshot> decode_snapshot(const uint8_t* bytes, size_t size, const std::string& label);
// Only the header (checked with its checksum): `turbokv kv inspect`.
Result<SnapshotHeader> decode_snapshot_header(const uint8_t* bytes, size_t size,
                                              const std::string& label, size_t* header_bytes);

// Tests and fuzzing: rewrites the header checksum and every page checksum that
// lies inside the bytes, so mutations reach the checks behind the checksums.
void reseal_snapshot(std::vector<uint8_t>* bytes);

// Atomic write: path.tmp.<pid> in the same directory, write, fsync, rename over
// path, fsync the directory. On failure the old file (if any) is untouched.
Status write_file_atomic(const std::string& path, const std::vector<uint8_t>& bytes);
Result<std::vector<uint8_t>> read_whole_file(const std::string& path);
Result<Snapshot> read_snapshot(const std::string& path);

// Refuses a snapshot whose bytes mean something else in the cache described by
// `mine` (same fields; tokens ignored): model, scheme, bits, shapes, page size,
// key centering, quant_start, swa format, store layout. One message per field,
// naming the snapshot's value and the engine's.
Status check_snapshot_compatible(const SnapshotHeader& snap, const SnapshotHeader& mine,
                                 const std::string& label);

}  // namespace tkv::kv
