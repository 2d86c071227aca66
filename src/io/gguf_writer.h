// Streaming GGUF v3 writer. Metadata and tensor infos are small and kept in
// memory; tensor data comes chunk by chunk from a callback and goes straight to
// PATH.tmp, renamed to PATH only once complete, so a multi-GB model never sits in
// RAM and a failed write leaves no half file. Layout per ggml/docs/gguf.md:
// header, KVs, tensor infos, padding to general.alignment, each tensor's data
// padded to the alignment (as ggml's gguf_write does).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "io/gguf.h"
#include "quant/ggml_types.h"

namespace tkv::io {

class GgufWriter {
 public:
  // Writes general.alignment (u32) as the first key; alignment: a power of two >= 8.
  explicit GgufWriter(uint32_t alignment = 32);

  // Metadata, kept in insertion order; setting a key again replaces its value.
  void set_string(const std::string& key, const std::string& value);
  void set_u32(const std::string& key, uint32_t value);
  void set_u64(const std::string& key, uint64_t value);
  void set_f32(const std::string& key, float value);
  void set_bool(const std::string& key, bool value);
  // A value as the reader parsed it (copying keys between files); nested
  // arrays, which the reader does not keep, are refused.
  Status set_value(const std::string& key, const GgufValue& value);

  // A tensor of `type`, shape in ggml order (shape[0] contiguous; it must be a
  // multiple of the type's block size). Refuses duplicate names.
  Status add_tensor(const std::string& name, std::vector<int64_t> shape, ggml::Type type);
  size_t n_tensors() const { return tensors_.size(); }
  uint64_t data_bytes() const;  // sum of the tensors' bytes, padding included

  // Produces bytes [offset, offset + n) of tensor `index` into dst. Called in
  // tensor order with consecutive offsets; n is a multiple of the type's block bytes.
  using FillFn = std::function<Status(size_t index, uint64_t offset, uint8_t* dst, size_t n_bytes)>;
  // Called after each chunk with bytes of tensor data written so far and the total.
  using ProgressFn = std::function<void(uint64_t done, uint64_t total)>;
  // Writes PATH.tmp and renames it to PATH; errors start with "[gguf] write".
  Status write(const std::string& path, const FillFn& fill, const ProgressFn& progress = {},
               size_t chunk_bytes = size_t{8} << 20) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> shape;
    ggml::Type type;
    uint64_t n_bytes;
  };
  struct Kv {
    std::string key;
    std::vector<uint8_t> bytes;  // type id + encoded value
  };
  void set_raw(const std::string& key, std::vector<uint8_t> bytes);
  std::vector<uint8_t> header_bytes() const;
  uint64_t padded(uint64_t n) const { return (n + alignment_ - 1) / alignment_ * alignment_; }

  uint32_t alignment_;
  std::vector<Kv> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace tkv::io
