// GGUF v2/v3 reader: header, metadata, tensor infos, data section. Validates
// every count, shape, type id, offset and alignment against the file before
// use; tensors must lie inside the data section, aligned and non-overlapping.
// Reference: ggml/docs/gguf.md, ggml/src/gguf.cpp gguf_init_from_file_impl.
#include "io/gguf.h"

#include <algorithm>
#include <limits>

#include "base/log.h"
#include "io/gguf_cursor.h"
#include "io/mmap_file.h"

namespace tkv::io {
namespace {

using detail::gguf_type_name;
using detail::GgufCursor;

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian u32
constexpr uint32_t kMaxDims = 4;
// Smallest encodings, used to bound counts before reserving: key (8) + type (4) + 1-byte value;
// tensor info: name length (8) + n_dims (4) + type (4) + offset (8).
constexpr uint64_t kMinKvBytes = 13;
constexpr uint64_t kMinTensorInfoBytes = 24;

uint32_t byteswap32(uint32_t v) {
  return (v >> 24) | ((v >> 8) & 0xff00u) | ((v << 8) & 0xff0000u) | (v << 24);
}

bool is_unsigned(GgufType t) {
  return t == GgufType::kUint8 || t == GgufType::kUint16 || t == GgufType::kUint32 ||
         t == GgufType::kUint64;
}
bool is_signed(GgufType t) {
  return t == GgufType::kInt8 || t == GgufType::kInt16 || t == GgufType::kInt32 ||
         t == GgufType::kInt64;
}
bool is_float(GgufType t) {
  return t == GgufType::kFloat32 || t == GgufType::kFloat64;
}

Status read_header(GgufCursor& cur, uint32_t* version, uint64_t* n_tensors, uint64_t* n_kv) {
  uint32_t magic = 0;
  TKV_RETURN_IF_ERROR(cur.read(&magic, "magic"));
  if (magic != kMagic)
    return cur.error("bad magic 0x{:08x}, expected 'GGUF' (0x{:08x})", magic, kMagic);
  TKV_RETURN_IF_ERROR(cur.read(version, "version"));
  if (*version == 1) return cur.error("GGUF version 1 is not supported (only versions 2 and 3)");
  if (byteswap32(*version) == 2 || byteswap32(*version) == 3) {
    return cur.error("big-endian GGUF (version field {:#x}) is not supported", *version);
  }
  if (*version != 2 && *version != 3)
    return cur.error("unsupported GGUF version {} (only 2 and 3)", *version);
  TKV_RETURN_IF_ERROR(cur.read(n_tensors, "tensor count"));
  TKV_RETURN_IF_ERROR(cur.read(n_kv, "metadata count"));
  if (*n_kv > cur.remaining() / kMinKvBytes) {
    return cur.error("metadata count {} cannot fit in the {} bytes left", *n_kv, cur.remaining());
  }
  return {};
}

// Parses shape, type and offset of one tensor info (name already read).
Status read_tensor_info(GgufCursor& cur, GgufTensorInfo* t) {
  uint32_t n_dims = 0;
  TKV_RETURN_IF_ERROR(cur.read(&n_dims, "n_dims"));
  if (n_dims > kMaxDims) return cur.error("n_dims {} exceeds the maximum of {}", n_dims, kMaxDims);
  t->shape.resize(n_dims);
  int64_t n_elems = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    TKV_RETURN_IF_ERROR(cur.read(&t->shape[d], "dimension"));
    if (t->shape[d] < 0) return cur.error("dimension {} is negative ({})", d, t->shape[d]);
    if (t->shape[d] > 0 && n_elems > std::numeric_limits<int64_t>::max() / t->shape[d]) {
      return cur.error("element count overflows int64 at dimension {} ({})", d, t->shape[d]);
    }
    n_elems *= t->shape[d];
  }
  uint32_t type_id = 0;
  TKV_RETURN_IF_ERROR(cur.read(&type_id, "ggml type"));
  const ggml::TypeTraits* tr = ggml::type_traits(type_id);
  if (tr == nullptr) return cur.error("unknown ggml type id {}", type_id);
  t->type = tr->type;
  const int64_t row = n_dims > 0 ? t->shape[0] : 1;
  if (row % tr->block_elems != 0) {
    return cur.error("row length {} is not a multiple of the {} block size {}", row, tr->name,
                     tr->block_elems);
  }
  const uint64_t n_blocks = static_cast<uint64_t>(n_elems) / static_cast<uint64_t>(tr->block_elems);
  if (n_blocks > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(tr->block_bytes)) {
    return cur.error("byte size of {} {} blocks overflows", n_blocks, tr->name);
  }
  t->n_bytes = static_cast<size_t>(n_blocks * static_cast<uint64_t>(tr->block_bytes));
  TKV_RETURN_IF_ERROR(cur.read(&t->offset, "tensor offset"));
  return {};
}

}  // namespace

int64_t GgufTensorInfo::n_elems() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // validated not to overflow at parse time
  return n;
}

Result<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path) {
  auto mapped = MmapFile::open(path);
  if (!mapped.ok())
    return Status(mapped.status().code(), "[gguf] " + path + ": " + mapped.status().message());
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  f->base_ = (*mapped)->data();
  f->size_ = (*mapped)->size();
  f->mapping_ = std::move(mapped).value().release();
  TKV_RETURN_IF_ERROR(f->parse_all_safe());
  return f;
}

Result<std::unique_ptr<GgufFile>> GgufFile::parse(const uint8_t* bytes, size_t size,
                                                  std::string label) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = std::move(label);
  f->base_ = bytes;
  f->size_ = bytes == nullptr ? 0 : size;
  TKV_RETURN_IF_ERROR(f->parse_all_safe());
  return f;
}

Status GgufFile::guarded_read(void (*fn)(void*), void* arg) const {
  if (mapping_ != nullptr) return static_cast<const MmapFile*>(mapping_)->guarded_read(fn, arg);
  fn(arg);
  return Status();
}

GgufFile::~GgufFile() {
  delete static_cast<MmapFile*>(mapping_);
}

namespace {

Status read_metadata(GgufCursor& cur, uint64_t n_kv,
                     std::unordered_map<std::string, GgufValue>* kv) {
  kv->reserve(static_cast<size_t>(n_kv));  // bounded by the file size in read_header
  for (uint64_t i = 0; i < n_kv; ++i) {
    cur.set_context(fmt::format("metadata entry {}", i));
    std::string key;
    TKV_RETURN_IF_ERROR(cur.read_string(&key, "key"));
    if (key.empty()) return cur.error("empty key");
    cur.set_context(fmt::format("key '{}'", key));
    if (kv->count(key) != 0) return cur.error("duplicate key");
    uint32_t type_id = 0;
    TKV_RETURN_IF_ERROR(cur.read(&type_id, "value type"));
    GgufValue value;
    TKV_RETURN_IF_ERROR(detail::read_gguf_value(cur, type_id, &value));
    kv->emplace(std::move(key), std::move(value));
  }
  cur.set_context("");
  return {};
}

Status read_alignment(const GgufCursor& cur, const GgufValue* a, size_t* alignment) {
  if (a == nullptr) return {};
  if (a->type != GgufType::kUint32)
    return cur.error("general.alignment has type {}, expected u32", gguf_type_name(a->type));
  const uint64_t v = std::get<uint64_t>(a->scalar);
  if (v == 0 || (v & (v - 1)) != 0)
    return cur.error("general.alignment {} is not a power of two", v);
  // Tensor blocks are read in place (fp16/fp32 fields): 8-byte alignment at least.
  if (v < 8) return cur.error("general.alignment {} is below 8 (tensor data must be aligned)", v);
  *alignment = static_cast<size_t>(v);
  return {};
}

Status read_tensor_infos(GgufCursor& cur, uint64_t n_tensors, size_t alignment,
                         std::vector<GgufTensorInfo>* tensors,
                         std::unordered_map<std::string, size_t>* index) {
  if (n_tensors > cur.remaining() / kMinTensorInfoBytes) {
    return cur.error("tensor count {} cannot fit in the {} bytes left", n_tensors, cur.remaining());
  }
  tensors->resize(static_cast<size_t>(n_tensors));
  index->reserve(tensors->size());
  for (size_t i = 0; i < tensors->size(); ++i) {
    GgufTensorInfo& t = (*tensors)[i];
    cur.set_context(fmt::format("tensor {}", i));
    TKV_RETURN_IF_ERROR(cur.read_string(&t.name, "tensor name"));
    cur.set_context(fmt::format("tensor {} '{}'", i, t.name));
    if (!index->emplace(t.name, i).second) return cur.error("duplicate tensor name");
    TKV_RETURN_IF_ERROR(read_tensor_info(cur, &t));
    if (t.offset % alignment != 0)
      return cur.error("offset {} is not a multiple of the alignment {}", t.offset, alignment);
  }
  cur.set_context("");
  return {};
}

// Resolves data pointers: each tensor inside [data_start, size), no two overlapping.
Status place_tensors(const std::string& path, const uint8_t* base, size_t size, size_t data_start,
                     std::vector<GgufTensorInfo>* tensors) {
  const size_t data_size = data_start <= size ? size - data_start : 0;
  for (GgufTensorInfo& t : *tensors) {
    if (t.offset > data_size || t.n_bytes > data_size - t.offset) {
      return data_loss(
          "[gguf] {}: tensor '{}': data [{}, +{}) runs past the end of the data section ({} bytes "
          "at byte {})",
          path, t.name, t.offset, t.n_bytes, data_size, data_start);
    }
    t.data = base + std::min(data_start + t.offset, size);  // clamped only for empty tensors
  }
  std::vector<const GgufTensorInfo*> order;
  order.reserve(tensors->size());
  for (const GgufTensorInfo& t : *tensors) {
    if (t.n_bytes > 0) order.push_back(&t);
  }
  std::sort(order.begin(), order.end(),
            [](const auto* a, const auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < order.size(); ++i) {
    const GgufTensorInfo& p = *order[i - 1];
    const GgufTensorInfo& t = *order[i];
    if (p.offset + p.n_bytes > t.offset) {  // both end inside the data section: no overflow
      return data_loss("[gguf] {}: tensors '{}' [{}, +{}) and '{}' [{}, +{}) overlap", path, p.name,
                       p.offset, p.n_bytes, t.name, t.offset, t.n_bytes);
    }
  }
  return {};
}

}  // namespace

// std containers may throw (bad_alloc on a huge but file-backed count): the
// exception becomes a Status here, where it enters the loading path.
Status GgufFile::parse_all_safe() {
  try {
    return parse_all();
  } catch (const std::exception& e) {
    return make_error(StatusCode::kResourceExhausted, "[gguf] {}: parsing failed: {}", path_,
                      e.what());
  }
}

Status GgufFile::parse_all() {
  GgufCursor cur(base_, size_, path_);
  uint64_t n_tensors = 0, n_kv = 0;
  TKV_RETURN_IF_ERROR(read_header(cur, &version_, &n_tensors, &n_kv));
  TKV_RETURN_IF_ERROR(read_metadata(cur, n_kv, &kv_));
  TKV_RETURN_IF_ERROR(read_alignment(cur, find("general.alignment"), &alignment_));
  TKV_RETURN_IF_ERROR(read_tensor_infos(cur, n_tensors, alignment_, &tensors_, &tensor_index_));
  // The data section starts at the next multiple of the alignment (pos <= size, so no overflow).
  const size_t data_start = (cur.pos() + alignment_ - 1) / alignment_ * alignment_;
  return place_tensors(path_, base_, size_, data_start, &tensors_);
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_.find(std::string(key));
  return it == kv_.end() ? nullptr : &it->second;
}

namespace {

Status not_found(const std::string& path, std::string_view key) {
  return make_error(StatusCode::kNotFound, "[gguf] {}: key '{}' not found", path, key);
}
Status mismatch(const std::string& path, std::string_view key, const GgufValue& v,
                std::string_view want) {
  std::string have(gguf_type_name(v.type));
  if (v.type == GgufType::kArray) have = fmt::format("array of {}", gguf_type_name(v.elem_type));
  return invalid_argument("[gguf] {}: key '{}' has type {}, expected {}", path, key, have, want);
}

}  // namespace

Result<uint64_t> GgufFile::get_u64(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return not_found(path_, key);
  if (is_unsigned(v->type)) return std::get<uint64_t>(v->scalar);
  if (is_signed(v->type)) {
    const int64_t i = std::get<int64_t>(v->scalar);
    if (i < 0)
      return invalid_argument("[gguf] {}: key '{}' is {}, expected a non-negative integer", path_,
                              key, i);
    return static_cast<uint64_t>(i);
  }
  return mismatch(path_, key, *v, "an unsigned integer");
}

Result<int64_t> GgufFile::get_i64(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return not_found(path_, key);
  if (is_signed(v->type)) return std::get<int64_t>(v->scalar);
  if (is_unsigned(v->type)) {
    const uint64_t u = std::get<uint64_t>(v->scalar);
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return invalid_argument("[gguf] {}: key '{}' is {}, which does not fit in int64", path_, key,
                              u);
    }
    return static_cast<int64_t>(u);
  }
  return mismatch(path_, key, *v, "an integer");
}

Result<double> GgufFile::get_f64(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return not_found(path_, key);
  if (is_float(v->type)) return std::get<double>(v->scalar);
  if (is_unsigned(v->type)) return static_cast<double>(std::get<uint64_t>(v->scalar));
  if (is_signed(v->type)) return static_cast<double>(std::get<int64_t>(v->scalar));
  return mismatch(path_, key, *v, "a number");
}

Result<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return not_found(path_, key);
  if (v->type != GgufType::kBool) return mismatch(path_, key, *v, "bool");
  return std::get<bool>(v->scalar);
}

Result<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return not_found(path_, key);
  if (v->type != GgufType::kString) return mismatch(path_, key, *v, "string");
  return std::get<std::string>(v->scalar);
}

Result<std::vector<std::string>> GgufFile::get_string_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return not_found(path_, key);
  if (v->type != GgufType::kArray || v->elem_type != GgufType::kString)
    return mismatch(path_, key, *v, "array of string");
  return v->strings;
}

Result<std::vector<double>> GgufFile::get_number_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return not_found(path_, key);
  const GgufType e = v->elem_type;
  if (v->type != GgufType::kArray || e == GgufType::kString || e == GgufType::kArray) {
    return mismatch(path_, key, *v, "array of numbers");
  }
  return v->numbers;
}

namespace {

// A present key of the wrong type falls back to the default too, but says so.
template <typename T, typename D>
T value_or(Result<T> r, D&& def) {
  if (r.ok()) return std::move(r).value();
  if (r.status().code() != StatusCode::kNotFound)
    TKV_LOG_WARN("{} (using the default)", r.status().message());
  return T(std::forward<D>(def));
}

}  // namespace

uint64_t GgufFile::get_u64_or(std::string_view key, uint64_t def) const {
  return value_or(get_u64(key), def);
}
double GgufFile::get_f64_or(std::string_view key, double def) const {
  return value_or(get_f64(key), def);
}
std::string GgufFile::get_string_or(std::string_view key, std::string def) const {
  return value_or(get_string(key), std::move(def));
}
bool GgufFile::get_bool_or(std::string_view key, bool def) const {
  return value_or(get_bool(key), def);
}

}  // namespace tkv::io
