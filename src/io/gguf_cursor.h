// Internal to the GGUF reader: a bounds-checked little-endian cursor over the
// file image, and the metadata value parser built on it. Every read checks the
// remaining bytes first; every count is bounded by remaining / min_elem_bytes
// before anything is allocated. Reference: ggml/docs/gguf.md.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "base/status.h"
#include "io/gguf.h"

namespace tkv::io::detail {

class GgufCursor {
 public:
  GgufCursor(const uint8_t* data, size_t size, const std::string& label)
      : data_(data), size_(size), label_(label) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }
  const std::string& label() const { return label_; }

  // What is being parsed ("key 'x'", "tensor 3 'y'"), prefixed to errors; empty for none.
  void set_context(std::string context) { context_ = std::move(context); }

  // "[gguf] <label>: [<context>: ]<msg> (at byte <pos>)" as DataLoss.
  template <typename... Args>
  Status error(fmt::format_string<Args...> f, Args&&... args) const {
    return data_loss("[gguf] {}: {}{}{} (at byte {})", label_, context_,
                     context_.empty() ? "" : ": ", fmt::format(f, std::forward<Args>(args)...),
                     pos_);
  }

  Status need(size_t n, std::string_view what) const {
    if (n > remaining())
      return error("truncated: {} needs {} bytes, {} left", what, n, remaining());
    return {};
  }

  template <typename T>
  Status read(T* out, std::string_view what) {  // little-endian host assumed (x86-64, aarch64)
    TKV_RETURN_IF_ERROR(need(sizeof(T), what));
    std::memcpy(out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return {};
  }

  Status read_string(std::string* out, std::string_view what) {
    uint64_t len = 0;
    TKV_RETURN_IF_ERROR(read(&len, what));
    if (len > remaining())
      return error("{}: string length {} exceeds the {} bytes left in the file", what, len,
                   remaining());
    out->assign(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return {};
  }

  Status skip(uint64_t n, std::string_view what) {
    if (n > remaining())
      return error("truncated: {} needs {} bytes, {} left", what, n, remaining());
    pos_ += static_cast<size_t>(n);
    return {};
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& label_;
  std::string context_;
};

// Name of a GGUF value type for messages ("u32", "string", ...); "?" if unknown.
std::string_view gguf_type_name(GgufType t);
// Parses one value of type id `type_id` at the cursor into *out (errors carry the cursor's
// context).
Status read_gguf_value(GgufCursor& cur, uint32_t type_id, GgufValue* out);

}  // namespace tkv::io::detail
