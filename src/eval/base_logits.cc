// Base-logits writer, content hashes and the header layout shared with the
// reader (format in base_logits.h).
#include "eval/base_logits.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "eval/base_logits_format.h"

namespace tkv::eval {

Result<uint64_t> hash_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return make_error(StatusCode::kNotFound, "[eval] cannot read {} to hash it", path);
  bool err = false;
  const uint64_t h = base_format::hash_stream(f, &err);
  std::fclose(f);
  if (err) return data_loss("[eval] read error while hashing {}", path);
  return h;
}

uint64_t hash_bytes(const std::string& bytes) {
  return XXH3_64bits(bytes.data(), bytes.size());
}

namespace base_format {

uint64_t hash_stream(std::FILE* f, bool* read_error) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  std::vector<char> buf(1 << 20);
  size_t got;
  while ((got = std::fread(buf.data(), 1, buf.size(), f)) > 0)
    XXH3_64bits_update(st, buf.data(), got);
  *read_error = std::ferror(f) != 0;
  const uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return h;
}

std::string encode_header(const Header& h) {
  std::string out(kMagic, sizeof(kMagic));
  append_pod(&out, kVersion);
  append_pod(&out, static_cast<uint32_t>(h.key.size()));
  out += h.key;
  append_pod(&out, h.n_vocab);
  append_pod(&out, h.k_min);
  append_pod(&out, h.k_max);
  append_pod(&out, uint32_t{0});
  append_pod(&out, h.mass);
  append_pod(&out, h.n_positions);
  append_pod(&out, h.payload_hash);
  append_pod(&out, static_cast<uint64_t>(XXH3_64bits(out.data(), out.size())));
  return out;
}

}  // namespace base_format

bool reseal_base_logits(std::string* bytes) {
  using namespace base_format;
  if (bytes->size() < kFixedPrefix) return false;
  uint32_t key_len = 0;
  std::memcpy(&key_len, bytes->data() + 12, 4);
  if (key_len > kMaxKey || bytes->size() < header_size(key_len)) return false;
  const size_t hs = header_size(key_len);
  const uint64_t ph = XXH3_64bits(bytes->data() + hs, bytes->size() - hs);
  std::memcpy(bytes->data() + hs - 16, &ph, 8);
  const uint64_t hh = XXH3_64bits(bytes->data(), hs - 8);
  std::memcpy(bytes->data() + hs - 8, &hh, 8);
  return true;
}

Result<std::unique_ptr<BaseLogitsWriter>> BaseLogitsWriter::create(const std::string& path,
                                                                   const std::string& key,
                                                                   int n_vocab,
                                                                   const TruncationParams& tp) {
  if (key.size() > base_format::kMaxKey)
    return invalid_argument("[eval] base key is {} bytes (at most {})", key.size(),
                            base_format::kMaxKey);
  std::unique_ptr<BaseLogitsWriter> w(new BaseLogitsWriter());
  w->path_ = path;
  w->key_ = key;
  w->n_vocab_ = n_vocab;
  w->tp_ = tp;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  // Same folder as the destination, so that rename() is atomic.
  std::string tmpl = path + ".tmp.XXXXXX";
  const int fd = mkstemp(tmpl.data());
  if (fd < 0)
    return invalid_argument("[eval] cannot create a temporary file next to {}: {}", path,
                            std::strerror(errno));
  w->tmp_ = tmpl;
  w->f_ = fdopen(fd, "wb");
  if (!w->f_) {
    ::close(fd);
    return invalid_argument("[eval] cannot open {}", tmpl);
  }
  // Placeholder header of the final size; finish() rewrites it with the count and hashes.
  const std::string h =
      base_format::encode_header({key, n_vocab, tp.k_min, tp.k_max, tp.mass, 0, 0});
  if (std::fwrite(h.data(), 1, h.size(), w->f_) != h.size())
    return data_loss("[eval] short write to {}", tmpl);
  auto* st = XXH3_createState();
  XXH3_64bits_reset(st);
  w->hash_ = st;
  return w;
}

BaseLogitsWriter::~BaseLogitsWriter() {
  if (f_) std::fclose(f_);
  if (!tmp_.empty()) std::remove(tmp_.c_str());  // unfinished: leave nothing behind
  if (hash_) XXH3_freeState(static_cast<XXH3_state_t*>(hash_));
}

Status BaseLogitsWriter::append(const TruncatedDist& d) {
  std::string rec;
  const uint32_t k = static_cast<uint32_t>(d.ids.size());
  base_format::append_pod(&rec, d.target);
  base_format::append_pod(&rec, d.argmax);
  base_format::append_pod(&rec, d.target_logp);
  base_format::append_pod(&rec, d.tail_mass);
  base_format::append_pod(&rec, k);
  rec.append(reinterpret_cast<const char*>(d.ids.data()), k * sizeof(int32_t));
  rec.append(reinterpret_cast<const char*>(d.logp.data()), k * sizeof(float));
  XXH3_64bits_update(static_cast<XXH3_state_t*>(hash_), rec.data(), rec.size());
  if (std::fwrite(rec.data(), 1, rec.size(), f_) != rec.size())
    return data_loss("[eval] short write to base logits {}", tmp_);
  ++n_;
  return Status();
}

namespace {
Status sync_dir(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string dir = parent.empty() ? std::string(".") : parent.string();
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return data_loss("[eval] cannot open folder {} to sync it", dir);
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return data_loss("[eval] fsync of folder {} failed: {}", dir, std::strerror(errno));
  return Status();
}
}  // namespace

Status BaseLogitsWriter::finish() {
  const uint64_t ph = XXH3_64bits_digest(static_cast<XXH3_state_t*>(hash_));
  const std::string h =
      base_format::encode_header({key_, n_vocab_, tp_.k_min, tp_.k_max, tp_.mass, n_, ph});
  bool ok = std::fflush(f_) == 0 && std::fseek(f_, 0, SEEK_SET) == 0 &&
            std::fwrite(h.data(), 1, h.size(), f_) == h.size() && std::fflush(f_) == 0;
  ok = ok && ::fsync(fileno(f_)) == 0;
  ok = std::fclose(f_) == 0 && ok;
  f_ = nullptr;
  if (!ok) return data_loss("[eval] cannot write base logits {}: {}", tmp_, std::strerror(errno));
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0)
    return data_loss("[eval] cannot rename {} to {}: {}", tmp_, path_, std::strerror(errno));
  tmp_.clear();
  return sync_dir(path_);
}

}  // namespace tkv::eval
