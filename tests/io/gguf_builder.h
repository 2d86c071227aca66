// Test-only GGUF writer: builds v2/v3 images in memory, with knobs to make them
// hostile (raw type ids, forced offsets, bad shapes). Layout per ggml/docs/gguf.md:
// header, KVs, tensor infos, padding to the alignment, tensor data (no trailing pad).
#pragma once
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace tkv::io::testing {

class GgufBuilder {
 public:
  explicit GgufBuilder(uint32_t version = 3) : version_(version) {}

  template <typename T>
  GgufBuilder& kv(const std::string& key, uint32_t type_id, T v) {
    begin_kv(key, type_id);
    put(&kv_bytes_, v);
    return *this;
  }
  GgufBuilder& kv_string(const std::string& key, const std::string& s) {
    begin_kv(key, 8);
    put_string(&kv_bytes_, s);
    return *this;
  }
  template <typename T>
  GgufBuilder& kv_array(const std::string& key, uint32_t elem_type, const std::vector<T>& v) {
    begin_kv(key, 9);
    put(&kv_bytes_, elem_type);
    put(&kv_bytes_, uint64_t{v.size()});
    for (const T& x : v) put(&kv_bytes_, x);
    return *this;
  }
  GgufBuilder& kv_string_array(const std::string& key, const std::vector<std::string>& v) {
    begin_kv(key, 9);
    put(&kv_bytes_, uint32_t{8});
    put(&kv_bytes_, uint64_t{v.size()});
    for (const std::string& s : v) put_string(&kv_bytes_, s);
    return *this;
  }
  // Any value encoding, written verbatim after the key and type id.
  GgufBuilder& kv_raw(const std::string& key, uint32_t type_id, const std::vector<uint8_t>& value) {
    begin_kv(key, type_id);
    kv_bytes_.insert(kv_bytes_.end(), value.begin(), value.end());
    return *this;
  }
  GgufBuilder& alignment(uint32_t a) {
    alignment_ = a;
    return kv("general.alignment", 4, a);
  }
  GgufBuilder& tensor(const std::string& name, std::vector<int64_t> shape, uint32_t type_id,
                      std::vector<uint8_t> data, std::optional<uint64_t> offset = std::nullopt) {
    tensors_.push_back({name, std::move(shape), type_id, std::move(data), offset});
    return *this;
  }

  std::vector<uint8_t> build() const {
    std::vector<uint8_t> b;
    put(&b, uint32_t{0x46554747});
    put(&b, version_);
    put(&b, uint64_t{tensors_.size()});
    put(&b, n_kv_);
    b.insert(b.end(), kv_bytes_.begin(), kv_bytes_.end());
    std::vector<uint64_t> offsets;
    uint64_t next = 0;
    for (const Tensor& t : tensors_) {
      offsets.push_back(t.offset.value_or(next));
      next = align(offsets.back() + t.data.size());
      put_string(&b, t.name);
      put(&b, uint32_t(t.shape.size()));
      for (int64_t d : t.shape) put(&b, d);
      put(&b, t.type_id);
      put(&b, offsets.back());
    }
    b.resize(align(b.size()), 0);
    const size_t data_start = b.size();
    for (size_t i = 0; i < tensors_.size(); ++i) {
      if (offsets[i] > (uint64_t{1} << 20))
        continue;  // hostile far offset: its data is simply absent
      b.resize(std::max(b.size(), data_start + offsets[i] + tensors_[i].data.size()), 0);
      std::memcpy(b.data() + data_start + offsets[i], tensors_[i].data.data(),
                  tensors_[i].data.size());
    }
    return b;
  }

  template <typename T>
  static void put(std::vector<uint8_t>* b, T v) {
    const size_t n = b->size();
    b->resize(n + sizeof(T));
    std::memcpy(b->data() + n, &v, sizeof(T));
  }
  static void put_string(std::vector<uint8_t>* b, const std::string& s) {
    put(b, uint64_t{s.size()});
    b->insert(b->end(), s.begin(), s.end());
  }

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> shape;
    uint32_t type_id;
    std::vector<uint8_t> data;
    std::optional<uint64_t> offset;
  };
  void begin_kv(const std::string& key, uint32_t type_id) {
    put_string(&kv_bytes_, key);
    put(&kv_bytes_, type_id);
    ++n_kv_;
  }
  uint64_t align(uint64_t x) const { return (x + alignment_ - 1) / alignment_ * alignment_; }

  uint32_t version_;
  uint32_t alignment_ = 32;
  uint64_t n_kv_ = 0;
  std::vector<uint8_t> kv_bytes_;
  std::vector<Tensor> tensors_;
};

}  // namespace tkv::io::testing
