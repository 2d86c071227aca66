// GGUF reader (versions 2 and 3) over a read-only mmap. Every offset, count,
// string length and type id is validated against the file size before use, so
// a truncated or hostile file yields a Status, never an out-of-bounds read.
// Reference: ggml/docs/gguf.md (format), ggml.c gguf_init_from_file (behaviour).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "base/status.h"
#include "quant/ggml_types.h"

namespace tkv::io {

enum class GgufType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// One metadata value. Arrays hold their element type and a vector of scalars
// (strings for string arrays). Large numeric arrays keep their raw bytes view.
struct GgufValue {
  GgufType type = GgufType::kUint8;
  GgufType elem_type = GgufType::kUint8;                              // for arrays
  std::variant<uint64_t, int64_t, double, bool, std::string> scalar;  // non-array
  std::vector<std::string> strings;                                   // string arrays
  std::vector<double> numbers;  // numeric / bool arrays, widened
  size_t array_len = 0;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> shape;  // ggml order: shape[0] is the contiguous (row) dimension
  ggml::Type type = ggml::Type::kF32;
  uint64_t offset = 0;            // relative to the data section
  const uint8_t* data = nullptr;  // resolved pointer into the mapping
  size_t n_bytes = 0;
  int64_t n_elems() const;
};

class GgufFile {
 public:
  // Maps and parses `path`. Fails with "[gguf] <path>: ..." on any defect.
  static Result<std::unique_ptr<GgufFile>> open(const std::string& path);
  // Parses an in-memory image (for fuzzing and tests); `bytes` must outlive the object.
  static Result<std::unique_ptr<GgufFile>> parse(const uint8_t* bytes, size_t size,
                                                 std::string label = "<memory>");
  ~GgufFile();

  uint32_t version() const { return version_; }
  size_t alignment() const { return alignment_; }
  const std::unordered_map<std::string, GgufValue>& metadata() const { return kv_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  const GgufValue* find(std::string_view key) const;

  // Typed getters: NotFound if missing, InvalidArgument on a type mismatch.
  // Integer getters accept any integer type whose value fits.
  Result<uint64_t> get_u64(std::string_view key) const;
  Result<int64_t> get_i64(std::string_view key) const;
  Result<double> get_f64(std::string_view key) const;  // any numeric type
  Result<bool> get_bool(std::string_view key) const;
  Result<std::string> get_string(std::string_view key) const;
  Result<std::vector<std::string>> get_string_array(std::string_view key) const;
  Result<std::vector<double>> get_number_array(std::string_view key) const;
  // Conveniences with defaults for optional keys.
  uint64_t get_u64_or(std::string_view key, uint64_t def) const;
  double get_f64_or(std::string_view key, double def) const;
  std::string get_string_or(std::string_view key, std::string def) const;
  bool get_bool_or(std::string_view key, bool def) const;

  const std::string& path() const { return path_; }
  size_t file_size() const { return size_; }
  // Runs fn(arg), which reads tensor data: a file truncated while mapped gives
  // an error instead of SIGBUS (io/mmap_file.h). In-memory images just run fn.
  Status guarded_read(void (*fn)(void*), void* arg) const;

 private:
  GgufFile() = default;
  Status parse_all();
  Status parse_all_safe();
  std::string path_;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  void* mapping_ = nullptr;  // non-null when we own an mmap
  uint32_t version_ = 0;
  size_t alignment_ = 32;
  std::unordered_map<std::string, GgufValue> kv_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace tkv::io
