// Base-logits file reader and writer (format in base_logits.h). The header records
// n_positions so a truncated file is detected; ids are range-checked on read.
#include "eval/base_logits.h"

#include <cstring>
#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

namespace tkv::eval {
namespace {
constexpr char kMagic[8] = {'T', 'K', 'V', 'B', 'A', 'S', 'E', '1'};

template <typename T>
bool put(std::FILE* f, const T& v) {
  return std::fwrite(&v, sizeof(T), 1, f) == 1;
}
template <typename T>
bool get(std::FILE* f, T* v) {
  return std::fread(v, sizeof(T), 1, f) == 1;
}
}  // namespace

Result<std::unique_ptr<BaseLogitsWriter>> BaseLogitsWriter::create(const std::string& path,
                                                                   const std::string& key,
                                                                   int n_vocab,
                                                                   const TruncationParams& tp) {
  std::unique_ptr<BaseLogitsWriter> w(new BaseLogitsWriter());
  w->path_ = path;
  w->key_ = key;
  w->n_vocab_ = n_vocab;
  w->tp_ = tp;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  // Records go to a body file; finish() writes header (with the final count) + body.
  w->f_ = std::fopen((path + ".body.tmp").c_str(), "wb");
  if (!w->f_) return invalid_argument("[eval] cannot write base logits {}.body.tmp", path);
  return w;
}

BaseLogitsWriter::~BaseLogitsWriter() {
  if (f_) std::fclose(f_);
}

Status BaseLogitsWriter::append(const TruncatedDist& d) {
  const uint32_t k = static_cast<uint32_t>(d.ids.size());
  bool ok = put(f_, d.target) && put(f_, d.argmax) && put(f_, d.target_logp) &&
            put(f_, d.tail_mass) && put(f_, k);
  ok = ok && std::fwrite(d.ids.data(), sizeof(int32_t), k, f_) == k;
  ok = ok && std::fwrite(d.logp.data(), sizeof(float), k, f_) == k;
  if (!ok) return data_loss("[eval] short write to base logits {}", path_);
  ++n_;
  return Status();
}

Status BaseLogitsWriter::finish() {
  if (std::fclose(f_) != 0) return data_loss("[eval] cannot close {}", path_);
  f_ = nullptr;
  nlohmann::json h = {
      {"key", key_},
      {"n_vocab", n_vocab_},
      {"n_positions", n_},
      {"truncation", {{"mass", tp_.mass}, {"k_min", tp_.k_min}, {"k_max", tp_.k_max}}}};
  const std::string hs = h.dump();
  const std::string tmp = path_ + ".tmp", body = path_ + ".body.tmp";
  std::FILE* out = std::fopen(tmp.c_str(), "wb");
  std::FILE* in = std::fopen(body.c_str(), "rb");
  if (!out || !in) return data_loss("[eval] cannot assemble base logits {}", path_);
  bool ok = std::fwrite(kMagic, 1, 8, out) == 8 && put(out, static_cast<uint32_t>(hs.size())) &&
            std::fwrite(hs.data(), 1, hs.size(), out) == hs.size();
  std::vector<char> buf(1 << 20);
  size_t got;
  while (ok && (got = std::fread(buf.data(), 1, buf.size(), in)) > 0)
    ok = std::fwrite(buf.data(), 1, got, out) == got;
  std::fclose(in);
  ok = std::fclose(out) == 0 && ok;
  if (!ok) return data_loss("[eval] short write to base logits {}", tmp);
  std::error_code ec;
  std::filesystem::remove(body, ec);
  std::filesystem::rename(tmp, path_, ec);
  if (ec) return data_loss("[eval] cannot rename {} to {}: {}", tmp, path_, ec.message());
  return Status();
}

Result<std::unique_ptr<BaseLogitsReader>> BaseLogitsReader::open(const std::string& path,
                                                                 const std::string& key,
                                                                 int n_vocab) {
  std::unique_ptr<BaseLogitsReader> r(new BaseLogitsReader());
  r->f_ = std::fopen(path.c_str(), "rb");
  if (!r->f_) return make_error(StatusCode::kNotFound, "[eval] no base logits at {}", path);
  char magic[8];
  uint32_t hl = 0;
  if (std::fread(magic, 1, 8, r->f_) != 8 || std::memcmp(magic, kMagic, 8) != 0 ||
      !get(r->f_, &hl) || hl > (1u << 20))
    return data_loss("[eval] {} is not a base-logits file", path);
  std::string hs(hl, '\0');
  if (std::fread(hs.data(), 1, hl, r->f_) != hl)
    return data_loss("[eval] {}: truncated header", path);
  nlohmann::json h = nlohmann::json::parse(hs, nullptr, false);
  if (h.is_discarded() || !h.contains("key") || !h.contains("n_positions"))
    return data_loss("[eval] {}: bad header", path);
  if (h["key"].get<std::string>() != key || h["n_vocab"].get<int>() != n_vocab)
    return invalid_argument("[eval] {} was made for another evaluation (key {})", path,
                            h["key"].get<std::string>());
  r->n_vocab_ = n_vocab;
  r->n_ = h["n_positions"].get<int64_t>();
  std::error_code ec;
  r->bytes_ = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  return r;
}

BaseLogitsReader::~BaseLogitsReader() {
  if (f_) std::fclose(f_);
}

Status BaseLogitsReader::next(TruncatedDist* d) {
  if (read_ >= n_) return data_loss("[eval] base logits: read past the {} stored positions", n_);
  uint32_t k = 0;
  bool ok = get(f_, &d->target) && get(f_, &d->argmax) && get(f_, &d->target_logp) &&
            get(f_, &d->tail_mass) && get(f_, &k) && k <= static_cast<uint32_t>(n_vocab_);
  if (ok) {
    d->ids.resize(k);
    d->logp.resize(k);
    ok = std::fread(d->ids.data(), sizeof(int32_t), k, f_) == k &&
         std::fread(d->logp.data(), sizeof(float), k, f_) == k;
  }
  if (!ok) return data_loss("[eval] base logits: truncated record {}", read_);
  auto in_range = [this](int32_t t) { return t >= 0 && t < n_vocab_; };
  bool ids_ok = in_range(d->target) && in_range(d->argmax);
  for (int32_t id : d->ids) ids_ok = ids_ok && in_range(id);
  if (!ids_ok) return data_loss("[eval] base logits: token id out of range in record {}", read_);
  ++read_;
  return Status();
}

}  // namespace tkv::eval
