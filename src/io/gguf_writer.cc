// GgufWriter (see gguf_writer.h): metadata encoding, tensor infos with aligned
// offsets, and the chunked data stream into PATH.tmp + rename.
// Reference: ggml/docs/gguf.md, ggml/src/gguf.cpp gguf_write_to_buf.
#include "io/gguf_writer.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

namespace tkv::io {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint32_t kVersion = 3;
constexpr size_t kMaxDims = 4;

template <typename T>
void put(std::vector<uint8_t>* b, T v) {
  const size_t n = b->size();
  b->resize(n + sizeof(T));
  std::memcpy(b->data() + n, &v, sizeof(T));
}
void put_string(std::vector<uint8_t>* b, const std::string& s) {
  put(b, uint64_t{s.size()});
  b->insert(b->end(), s.begin(), s.end());
}
std::vector<uint8_t> typed(GgufType t) {
  std::vector<uint8_t> b;
  put(&b, static_cast<uint32_t>(t));
  return b;
}

// One scalar of type t from its widened form (the reader's variant or an array's double).
Status put_number(std::vector<uint8_t>* b, GgufType t, double v) {
  switch (t) {
    case GgufType::kUint8:
    case GgufType::kBool:
      put(b, static_cast<uint8_t>(v));
      return {};
    case GgufType::kInt8:
      put(b, static_cast<int8_t>(v));
      return {};
    case GgufType::kUint16:
      put(b, static_cast<uint16_t>(v));
      return {};
    case GgufType::kInt16:
      put(b, static_cast<int16_t>(v));
      return {};
    case GgufType::kUint32:
      put(b, static_cast<uint32_t>(v));
      return {};
    case GgufType::kInt32:
      put(b, static_cast<int32_t>(v));
      return {};
    case GgufType::kFloat32:
      put(b, static_cast<float>(v));
      return {};
    case GgufType::kUint64:
      put(b, static_cast<uint64_t>(v));
      return {};
    case GgufType::kInt64:
      put(b, static_cast<int64_t>(v));
      return {};
    case GgufType::kFloat64:
      put(b, v);
      return {};
    case GgufType::kString:
    case GgufType::kArray:
      break;
  }
  return invalid_argument("[gguf] write: value type {} is not a number", static_cast<int>(t));
}

// Closes on scope exit; the path is removed unless released (a failed write leaves nothing).
struct TmpFile {
  std::string path;
  std::FILE* f = nullptr;
  bool keep = false;
  ~TmpFile() {
    if (f) std::fclose(f);
    if (!keep) std::remove(path.c_str());
  }
};

Status io_error(const std::string& path, const char* what) {
  return make_error(StatusCode::kIo, "[gguf] write {}: {} ({})", path, what, std::strerror(errno));
}

}  // namespace

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  set_u32("general.alignment", alignment);
}

void GgufWriter::set_raw(const std::string& key, std::vector<uint8_t> bytes) {
  for (Kv& kv : kv_) {
    if (kv.key == key) {
      kv.bytes = std::move(bytes);
      return;
    }
  }
  kv_.push_back({key, std::move(bytes)});
}

void GgufWriter::set_string(const std::string& key, const std::string& value) {
  std::vector<uint8_t> b = typed(GgufType::kString);
  put_string(&b, value);
  set_raw(key, std::move(b));
}
void GgufWriter::set_u32(const std::string& key, uint32_t value) {
  std::vector<uint8_t> b = typed(GgufType::kUint32);
  put(&b, value);
  set_raw(key, std::move(b));
}
void GgufWriter::set_u64(const std::string& key, uint64_t value) {
  std::vector<uint8_t> b = typed(GgufType::kUint64);
  put(&b, value);
  set_raw(key, std::move(b));
}
void GgufWriter::set_f32(const std::string& key, float value) {
  std::vector<uint8_t> b = typed(GgufType::kFloat32);
  put(&b, value);
  set_raw(key, std::move(b));
}
void GgufWriter::set_bool(const std::string& key, bool value) {
  std::vector<uint8_t> b = typed(GgufType::kBool);
  put(&b, uint8_t{value ? uint8_t{1} : uint8_t{0}});
  set_raw(key, std::move(b));
}

Status GgufWriter::set_value(const std::string& key, const GgufValue& v) {
  std::vector<uint8_t> b = typed(v.type);
  if (v.type == GgufType::kArray) {
    if (v.elem_type == GgufType::kArray)
      return invalid_argument("[gguf] write: '{}' is a nested array (not kept by the reader)", key);
    put(&b, static_cast<uint32_t>(v.elem_type));
    put(&b, uint64_t{v.array_len});
    if (v.elem_type == GgufType::kString) {
      for (const std::string& s : v.strings) put_string(&b, s);
    } else {
      for (double x : v.numbers) TKV_RETURN_IF_ERROR(put_number(&b, v.elem_type, x));
    }
  } else if (const auto* s = std::get_if<std::string>(&v.scalar)) {
    put_string(&b, *s);
  } else {
    double x = 0;
    if (const auto* u = std::get_if<uint64_t>(&v.scalar)) {
      // u64/i64 go through their own type: a double would round values past 2^53.
      if (v.type == GgufType::kUint64) {
        put(&b, *u);
        set_raw(key, std::move(b));
        return {};
      }
      x = static_cast<double>(*u);
    } else if (const auto* i = std::get_if<int64_t>(&v.scalar)) {
      if (v.type == GgufType::kInt64) {
        put(&b, *i);
        set_raw(key, std::move(b));
        return {};
      }
      x = static_cast<double>(*i);
    } else if (const auto* d = std::get_if<double>(&v.scalar)) {
      x = *d;
    } else if (const auto* t = std::get_if<bool>(&v.scalar)) {
      x = *t ? 1.0 : 0.0;
    }
    TKV_RETURN_IF_ERROR(put_number(&b, v.type, x));
  }
  set_raw(key, std::move(b));
  return {};
}

Status GgufWriter::add_tensor(const std::string& name, std::vector<int64_t> shape,
                              ggml::Type type) {
  const ggml::TypeTraits* tr = ggml::type_traits(static_cast<uint32_t>(type));
  if (!tr) return invalid_argument("[gguf] write: tensor '{}': unknown type", name);
  if (shape.empty() || shape.size() > kMaxDims)
    return invalid_argument("[gguf] write: tensor '{}' has {} dims (1..{})", name, shape.size(),
                            kMaxDims);
  for (int64_t d : shape) {
    if (d <= 0) return invalid_argument("[gguf] write: tensor '{}' has a dim of {}", name, d);
  }
  if (shape[0] % tr->block_elems != 0)
    return invalid_argument(
        "[gguf] write: tensor '{}': row length {} is not a multiple of {}'s block of {}", name,
        shape[0], tr->name, tr->block_elems);
  for (const Tensor& t : tensors_) {
    if (t.name == name) return invalid_argument("[gguf] write: duplicate tensor '{}'", name);
  }
  uint64_t rows = 1;
  for (size_t i = 1; i < shape.size(); ++i) rows *= static_cast<uint64_t>(shape[i]);
  const uint64_t n_bytes = ggml::row_bytes(type, shape[0]) * rows;
  tensors_.push_back({name, std::move(shape), type, n_bytes});
  return {};
}

uint64_t GgufWriter::data_bytes() const {
  uint64_t total = 0;
  for (const Tensor& t : tensors_) total += padded(t.n_bytes);
  return total;
}

std::vector<uint8_t> GgufWriter::header_bytes() const {
  std::vector<uint8_t> b;
  put(&b, kMagic);
  put(&b, kVersion);
  put(&b, uint64_t{tensors_.size()});
  put(&b, uint64_t{kv_.size()});
  for (const Kv& kv : kv_) {
    put_string(&b, kv.key);
    b.insert(b.end(), kv.bytes.begin(), kv.bytes.end());
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    put_string(&b, t.name);
    put(&b, static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) put(&b, d);
    put(&b, static_cast<uint32_t>(t.type));
    put(&b, offset);
    offset += padded(t.n_bytes);
  }
  b.resize(padded(b.size()), 0);
  return b;
}

Status GgufWriter::write(const std::string& path, const FillFn& fill, const ProgressFn& progress,
                         size_t chunk_bytes) const {
  TmpFile tmp{path + ".tmp"};
  tmp.f = std::fopen(tmp.path.c_str(), "wb");
  if (!tmp.f) return io_error(tmp.path, "cannot create");
  const std::vector<uint8_t> head = header_bytes();
  if (std::fwrite(head.data(), 1, head.size(), tmp.f) != head.size())
    return io_error(tmp.path, "header write failed");
  const uint64_t total = data_bytes();
  uint64_t done = 0;
  std::vector<uint8_t> buf;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& t = tensors_[i];
    const size_t block = static_cast<size_t>(ggml::traits(t.type).block_bytes);
    const size_t step = std::max(block, chunk_bytes / block * block);
    for (uint64_t off = 0; off < t.n_bytes; off += step) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(step, t.n_bytes - off));
      buf.resize(n);
      TKV_RETURN_IF_ERROR(fill(i, off, buf.data(), n));
      if (std::fwrite(buf.data(), 1, n, tmp.f) != n)
        return io_error(tmp.path, "data write failed (disk full?)");
      done += n;
      if (progress) progress(done, total);
    }
    const size_t pad = static_cast<size_t>(padded(t.n_bytes) - t.n_bytes);
    if (pad) {
      buf.assign(pad, 0);
      if (std::fwrite(buf.data(), 1, pad, tmp.f) != pad) return io_error(tmp.path, "pad failed");
      done += pad;
    }
  }
  const int rc = std::fclose(tmp.f);
  tmp.f = nullptr;
  if (rc != 0) return io_error(tmp.path, "close failed");
  if (std::rename(tmp.path.c_str(), path.c_str()) != 0)
    return io_error(path, "rename from .tmp failed");
  tmp.keep = true;
  return {};
}

}  // namespace tkv::io
