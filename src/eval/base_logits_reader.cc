// Base-logits reader (format in base_logits.h). open() trusts nothing: it checks
// the header, both checksums and every record's ranges and probabilities before
// the first next(), so a bad cache is reported (and recomputed by the caller)
// instead of producing figures.
#include <xxhash.h>

#include <cmath>
#include <cstring>

#include "eval/base_logits.h"
#include "eval/base_logits_format.h"

namespace tkv::eval {
namespace {
using namespace base_format;

template <typename T>
bool get(std::FILE* f, T* v) {
  return std::fread(v, sizeof(T), 1, f) == 1;
}

Result<Header> read_header(std::FILE* f, const std::string& name, size_t* size) {
  char prefix[kFixedPrefix];
  if (std::fread(prefix, 1, kFixedPrefix, f) != kFixedPrefix)
    return data_loss("[eval] {}: truncated header", name);
  if (std::memcmp(prefix, kMagic, sizeof(kMagic)) != 0)
    return data_loss("[eval] {} is not a base-logits file (bad magic)", name);
  uint32_t version = 0, key_len = 0;
  std::memcpy(&version, prefix + 8, 4);
  std::memcpy(&key_len, prefix + 12, 4);
  if (version != kVersion)
    return data_loss("[eval] {}: base-logits version {} (valid: {})", name, version, kVersion);
  if (key_len > kMaxKey)
    return data_loss("[eval] {}: key length {} out of range (at most {})", name, key_len, kMaxKey);
  std::string bytes(prefix, kFixedPrefix);
  bytes.resize(header_size(key_len));
  char* rest = bytes.data() + kFixedPrefix;
  if (std::fread(rest, 1, key_len + kFixedSuffix, f) != key_len + kFixedSuffix)
    return data_loss("[eval] {}: truncated header", name);
  uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + bytes.size() - 8, 8);
  if (XXH3_64bits(bytes.data(), bytes.size() - 8) != stored)
    return data_loss("[eval] {}: header checksum mismatch", name);
  Header h;
  h.key.assign(rest, key_len);
  const char* p = rest + key_len;
  std::memcpy(&h.n_vocab, p, 4);
  std::memcpy(&h.k_min, p + 4, 4);
  std::memcpy(&h.k_max, p + 8, 4);
  std::memcpy(&h.mass, p + 16, 8);
  std::memcpy(&h.n_positions, p + 24, 8);
  std::memcpy(&h.payload_hash, p + 32, 8);
  if (h.n_vocab <= 0 || h.k_min < 0 || h.k_max < 0 || !std::isfinite(h.mass) || h.mass <= 0 ||
      h.n_positions < 0)
    return data_loss(
        "[eval] {}: header field out of range (n_vocab {} > 0, k_min {} >= 0, k_max {} >= 0, "
        "mass {} finite > 0, n_positions {} >= 0)",
        name, h.n_vocab, h.k_min, h.k_max, h.mass, h.n_positions);
  *size = bytes.size();
  return h;
}

Status check_payload_hash(std::FILE* f, const std::string& name, uint64_t want) {
  bool err = false;
  const uint64_t h = hash_stream(f, &err);
  if (err) return data_loss("[eval] {}: read error", name);
  if (h != want) return data_loss("[eval] {}: payload checksum mismatch (corrupt file)", name);
  return Status();
}
}  // namespace

Result<std::unique_ptr<BaseLogitsReader>> BaseLogitsReader::open(const std::string& path,
                                                                 const std::string& key,
                                                                 int n_vocab) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return make_error(StatusCode::kNotFound, "[eval] no base logits at {}", path);
  return open_stream(f, path, key, n_vocab);
}

Result<std::unique_ptr<BaseLogitsReader>> BaseLogitsReader::open_stream(std::FILE* f,
                                                                        const std::string& name,
                                                                        const std::string& key,
                                                                        int n_vocab) {
  std::unique_ptr<BaseLogitsReader> r(new BaseLogitsReader());
  r->f_ = f;
  r->name_ = name;
  size_t hs = 0;
  TKV_ASSIGN_OR_RETURN(const Header h, read_header(f, name, &hs));
  if (h.key != key || h.n_vocab != n_vocab)
    return invalid_argument("[eval] {} was made for another evaluation (key {}, n_vocab {})", name,
                            h.key, h.n_vocab);
  if (std::fseek(f, 0, SEEK_END) != 0) return data_loss("[eval] {}: cannot seek", name);
  const int64_t total = std::ftell(f);
  const int64_t payload = total - static_cast<int64_t>(hs);
  if (h.n_positions > payload / kMinRecord)
    return data_loss("[eval] {}: truncated ({} positions in the header, room for at most {})", name,
                     h.n_positions, payload / kMinRecord);
  std::fseek(f, static_cast<long>(hs), SEEK_SET);
  TKV_RETURN_IF_ERROR(check_payload_hash(f, name, h.payload_hash));
  r->n_vocab_ = n_vocab;
  r->n_ = h.n_positions;
  r->payload_offset_ = static_cast<int64_t>(hs);
  r->mark_.assign(static_cast<size_t>(n_vocab), 0);
  std::fseek(f, static_cast<long>(hs), SEEK_SET);
  TruncatedDist d;
  for (int64_t i = 0; i < r->n_; ++i) TKV_RETURN_IF_ERROR(r->read_record(&d, i));
  if (std::ftell(f) != total)
    return data_loss("[eval] {}: {} bytes after the last of {} records", name,
                     total - std::ftell(f), r->n_);
  std::fseek(f, static_cast<long>(hs), SEEK_SET);
  r->bytes_ = total;
  return r;
}

BaseLogitsReader::~BaseLogitsReader() {
  if (f_) std::fclose(f_);
}

Status BaseLogitsReader::read_record(TruncatedDist* d, int64_t i) {
  uint32_t k = 0;
  bool ok = get(f_, &d->target) && get(f_, &d->argmax) && get(f_, &d->target_logp) &&
            get(f_, &d->tail_mass) && get(f_, &k);
  if (ok && k > static_cast<uint32_t>(n_vocab_))
    return data_loss("[eval] {}: record {} keeps {} tokens (at most n_vocab {})", name_, i, k,
                     n_vocab_);
  if (ok) {
    d->ids.resize(k);
    d->logp.resize(k);
    ok = std::fread(d->ids.data(), sizeof(int32_t), k, f_) == k &&
         std::fread(d->logp.data(), sizeof(float), k, f_) == k;
  }
  if (!ok) return data_loss("[eval] {}: truncated record {}", name_, i);
  auto in_range = [this](int32_t t) { return t >= 0 && t < n_vocab_; };
  bool ids_ok = in_range(d->target) && in_range(d->argmax);
  for (int32_t id : d->ids) {
    ids_ok = ids_ok && in_range(id) && mark_[static_cast<size_t>(id)] == 0;
    if (ids_ok) mark_[static_cast<size_t>(id)] = 1;
  }
  for (int32_t id : d->ids)
    if (in_range(id)) mark_[static_cast<size_t>(id)] = 0;
  if (!ids_ok)
    return data_loss("[eval] {}: record {}: token id out of range [0, {}) or repeated", name_, i,
                     n_vocab_);
  const auto logp_ok = [](double lp) { return std::isfinite(lp) && lp <= kBaseLogpSlack; };
  double mass = d->tail_mass;
  bool lp_ok = logp_ok(d->target_logp);
  for (float lp : d->logp) {
    lp_ok = lp_ok && logp_ok(lp);
    mass += std::exp(static_cast<double>(lp));
  }
  if (!lp_ok) return data_loss("[eval] {}: record {}: log-probability not finite or > 0", name_, i);
  if (!(d->tail_mass >= 0) || !(std::fabs(mass - 1.0) <= kBaseMassTolerance))
    return data_loss("[eval] {}: record {}: probabilities sum to {} (tail {}), not 1 within {}",
                     name_, i, mass, d->tail_mass, kBaseMassTolerance);
  return Status();
}

Status BaseLogitsReader::next(TruncatedDist* d) {
  if (read_ >= n_) return data_loss("[eval] base logits: read past the {} stored positions", n_);
  TKV_RETURN_IF_ERROR(read_record(d, read_));
  ++read_;
  return Status();
}

}  // namespace tkv::eval
