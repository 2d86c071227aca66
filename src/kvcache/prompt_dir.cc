// PromptDir (prompt_dir.h): the disk prompt cache's block files, its writer
// thread and its LRU eviction. Block file (little-endian, docs/kv-format.md):
//   "TKVPBLK\0" | u32 version | u32 page_size | u64 ns | u64 key | u64 parent key
//   | i64 block | u32 store | u32 layers | i64 page bytes | i32 tokens[page_size]
//   | pages[layers][page bytes] | u64 XXH3-64 of everything before it
#include "kvcache/prompt_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <filesystem>

#include <fmt/format.h>

#include "base/log.h"
#include "kvcache/prefix_key.h"

namespace tkv::kv {
namespace fs = std::filesystem;
namespace {

constexpr char kExt[] = ".tkvb";
constexpr char kMagic[8] = {'T', 'K', 'V', 'P', 'B', 'L', 'K', '\0'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 64;

struct BlockHeader {
  uint32_t version = 0, page_size = 0;
  uint64_t ns = 0, key = 0, parent = 0;
  int64_t block = 0;
  uint32_t store = 0, layers = 0;
  int64_t page_bytes = 0;
};

template <typename T>
T get(const uint8_t*& p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  p += sizeof(T);
  return v;
}

// "<16 hex>-<16 hex>.tkvb" -> (ns, key).
bool parse_entry_name(const std::string& name, uint64_t* ns, uint64_t* key) {
  if (name.size() != 16 + 1 + 16 + 5 || name[16] != '-' || name.substr(33) != kExt) return false;
  for (size_t i = 0; i < 33; ++i)
    if (i != 16 && !std::isxdigit(static_cast<unsigned char>(name[i]))) return false;
  *ns = std::stoull(name.substr(0, 16), nullptr, 16);
  *key = std::stoull(name.substr(17, 16), nullptr, 16);
  return true;
}

// "<entry>.tkvb.tmp.<pid>" (write_file_atomic's temp name) -> pid.
bool parse_tmp_name(const std::string& name, long* pid) {
  const size_t at = name.rfind(".tkvb.tmp.");
  if (at == std::string::npos) return false;
  const std::string digits = name.substr(at + 10);
  if (digits.empty() || digits.size() > 9 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  *pid = std::stol(digits);
  return true;
}

bool process_alive(long pid) {
  return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
}

int64_t now_ns() {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return int64_t{now.tv_sec} * 1000000000 + now.tv_nsec;
}

// Marks block b of a chain used at time t (now_ns(), taken once per chain).
// Earlier blocks get later times (1 us a block), so the LRU order evicts a
// chain from its end: a chain's first blocks are the ones other prompts share.
void touch(const std::string& path, int64_t t, int64_t b) {
  const int64_t ns = t - b * 1000;
  const timespec ts[2] = {{ns / 1000000000, ns % 1000000000}, {ns / 1000000000, ns % 1000000000}};
  ::utimensat(AT_FDCWD, path.c_str(), ts, 0);
}

BlockHeader parse_header(const uint8_t* p) {
  BlockHeader h;
  p += sizeof(kMagic);
  h.version = get<uint32_t>(p);
  h.page_size = get<uint32_t>(p);
  h.ns = get<uint64_t>(p);
  h.key = get<uint64_t>(p);
  h.parent = get<uint64_t>(p);
  h.block = get<int64_t>(p);
  h.store = get<uint32_t>(p);
  h.layers = get<uint32_t>(p);
  h.page_bytes = get<int64_t>(p);
  return h;
}

// The store of the snapshot layout that holds block b (stores start on page
// boundaries: PromptDir::open checks it).
size_t store_of(const SnapshotHeader& h, int64_t b) {
  const int64_t pos = b * h.page_size;
  for (size_t s = 0; s < h.stores.size(); ++s)
    if (pos >= h.stores[s].begin && pos < h.stores[s].end) return s;
  return h.stores.size() - 1;
}

int64_t page_bytes(const SnapshotHeader& h, size_t s) {
  return int64_t{h.n_kv_heads} * h.page_size * h.stores[s].row_bytes;
}

// What a header must say for block b under key/parent in this cache.
bool header_fits(const BlockHeader& bh, const SnapshotHeader& mine, uint64_t ns, uint64_t key) {
  if (bh.version != kVersion || bh.page_size != static_cast<uint32_t>(mine.page_size) ||
      bh.ns != ns || bh.key != key || bh.block < 0)
    return false;
  const size_t s = store_of(mine, bh.block);
  return bh.store == s && bh.layers == static_cast<uint32_t>(mine.stores[s].n_layers) &&
         bh.page_bytes == page_bytes(mine, s);
}

}  // namespace

std::string PromptDir::path_of(uint64_t key) const {
  return fmt::format("{}/{:016x}-{:016x}{}", dir_, ns_, key, kExt);
}

Result<std::unique_ptr<PromptDir>> PromptDir::open(const std::string& dir, uint64_t ns,
                                                   int64_t max_bytes, const SnapshotHeader& mine) {
  if (max_bytes <= 0)
    return invalid_argument("[prompt-cache] the size limit must be positive, got {}", max_bytes);
  for (const SnapshotStore& s : mine.stores)
    if (s.begin % mine.page_size != 0)
      return invalid_argument(
          "[prompt-cache] --kv-quant-start {} is not a multiple of the page size {}: a page "
          "would straddle two stores",
          s.begin, mine.page_size);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    return invalid_argument("[prompt-cache] cannot use {} as a directory: {}", dir,
                            ec ? ec.message() : "not a directory");
  if (::access(dir.c_str(), R_OK | W_OK | X_OK) != 0)
    return invalid_argument("[prompt-cache] {} is not writable", dir);
  std::unique_ptr<PromptDir> p(new PromptDir());
  p->dir_ = dir;
  p->ns_ = ns;
  p->max_bytes_ = max_bytes;
  p->mine_ = mine;
  p->mine_.tokens.clear();
  for (const auto& de : fs::directory_iterator(dir, ec)) {
    const std::string name = de.path().filename().string();
    long pid = 0;
    uint64_t e_ns = 0, key = 0;
    if (parse_tmp_name(name, &pid)) {
      if (!process_alive(pid) && fs::remove(de.path(), ec)) ++p->stats_.swept_tmp;
      continue;
    }
    if (!parse_entry_name(name, &e_ns, &key) || e_ns != ns) continue;  // another namespace
    uint8_t head[kHeaderBytes] = {};
    bool ok = false;
    const int fd = ::open(de.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      ok = ::read(fd, head, sizeof(head)) == static_cast<ssize_t>(sizeof(head)) &&
           std::memcmp(head, kMagic, sizeof(kMagic)) == 0;
      ::close(fd);
    }
    if (ok) {
      const BlockHeader bh = parse_header(head);
      ok =
          header_fits(bh, p->mine_, ns, key) &&
          static_cast<int64_t>(de.file_size(ec)) ==
              static_cast<int64_t>(kHeaderBytes + 4 * bh.page_size + bh.layers * bh.page_bytes + 8);
    }
    if (!ok) {
      TKV_LOG_WARN("[prompt-cache] {}: not a block of this model and scheme; removed",
                   de.path().string());
      fs::remove(de.path(), ec);
      ++p->stats_.skipped;
      continue;
    }
    ++p->stats_.entries;
  }
  if (ec) return invalid_argument("[prompt-cache] cannot list {}: {}", dir, ec.message());
  p->evict();
  p->thread_ = std::thread([q = p.get()] { q->writer(); });
  return p;
}

PromptDir::~PromptDir() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

int64_t PromptDir::count_present(const uint64_t* keys, int64_t n_blocks) const {
  int64_t b = 0;
  while (b < n_blocks && ::access(path_of(keys[b]).c_str(), F_OK) == 0) ++b;
  return b;
}

Result<std::vector<uint8_t>> PromptDir::read_block(uint64_t key, uint64_t parent, int64_t b,
                                                   const int32_t* tokens) const {
  const std::string path = path_of(key);
  TKV_ASSIGN_OR_RETURN(std::vector<uint8_t> f, read_whole_file(path));
  const size_t ps = static_cast<size_t>(mine_.page_size);
  const size_t s = store_of(mine_, b);
  const size_t want = kHeaderBytes + 4 * ps +
                      static_cast<size_t>(mine_.stores[s].n_layers * page_bytes(mine_, s)) + 8;
  if (f.size() != want)
    return invalid_argument("[prompt-cache] {}: {} bytes, expected {}", path, f.size(), want);
  uint64_t sum = 0;
  std::memcpy(&sum, f.data() + want - 8, 8);
  if (std::memcmp(f.data(), kMagic, sizeof(kMagic)) != 0 || XXH3_64bits(f.data(), want - 8) != sum)
    return invalid_argument("[prompt-cache] {}: bad magic or checksum", path);
  const BlockHeader bh = parse_header(f.data());
  if (!header_fits(bh, mine_, ns_, key) || bh.block != b || bh.parent != parent)
    return invalid_argument("[prompt-cache] {}: its header is not block {} of this chain", path, b);
  if (std::memcmp(f.data() + kHeaderBytes, tokens, 4 * ps) != 0 ||
      prefix_block_key(ns_, parent, tokens, mine_.page_size) != key)
    return invalid_argument("[prompt-cache] {}: its tokens are not the prompt's", path);
  return f;
}

std::shared_ptr<const Snapshot> PromptDir::lookup(const uint64_t* keys, int64_t n_blocks,
                                                  int64_t min_blocks, const int32_t* tokens) {
  const int64_t present = count_present(keys, n_blocks);
  if (present < std::max<int64_t>(min_blocks, 1)) return nullptr;
  const int64_t ps = mine_.page_size;
  std::vector<std::vector<uint8_t>> blocks;
  const int64_t t_used = now_ns();
  for (int64_t b = 0; b < present; ++b) {
    auto f = read_block(keys[b], b == 0 ? 0 : keys[b - 1], b, tokens + b * ps);
    if (!f.ok()) {
      if (f.status().code() != StatusCode::kNotFound) {  // evicted meanwhile is no error
        TKV_LOG_WARN("{}; removed", f.status().message());
        ::unlink(path_of(keys[b]).c_str());
        std::lock_guard<std::mutex> lk(mu_);
        ++stats_.skipped;
      }
      break;
    }
    touch(path_of(keys[b]), t_used, b);  // most recently used
    blocks.push_back(std::move(f.value()));
  }
  const int64_t nb = static_cast<int64_t>(blocks.size());
  if (nb < std::max<int64_t>(min_blocks, 1)) return nullptr;
  // One snapshot of nb * ps tokens: pages in file order (store, layer, page).
  SnapshotHeader h = mine_;
  h.tokens.assign(tokens, tokens + nb * ps);
  std::vector<std::vector<uint8_t>> pages;
  for (size_t s = 0; s < h.stores.size(); ++s) {
    const int64_t first = h.stores[s].begin / ps;
    const int64_t n_pages = snapshot_store_tokens(h.stores[s], nb * ps) / ps;
    const int64_t pb = page_bytes(h, s);
    for (int l = 0; l < h.stores[s].n_layers; ++l)
      for (int64_t p = 0; p < n_pages; ++p) {
        const uint8_t* src =
            blocks[static_cast<size_t>(first + p)].data() + kHeaderBytes + 4 * ps + l * pb;
        pages.emplace_back(src, src + pb);
      }
  }
  auto bytes = encode_snapshot(h, pages);
  if (!bytes.ok()) return nullptr;
  auto snap = decode_snapshot(bytes.value().data(), bytes.value().size(), dir_);
  if (!snap.ok()) return nullptr;
  std::lock_guard<std::mutex> lk(mu_);
  ++stats_.hits;
  stats_.tokens_loaded += nb * ps;
  return std::make_shared<const Snapshot>(std::move(snap.value()));
}

void PromptDir::put(std::vector<int32_t> tokens, std::vector<uint64_t> keys, int64_t first,
                    std::vector<std::vector<uint8_t>> pages) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (static_cast<int>(queue_.size()) >= kMaxQueued) {
      ++stats_.writes_dropped;
      return;
    }
    queue_.push_back(Job{std::move(tokens), std::move(keys), first, std::move(pages)});
  }
  cv_.notify_all();
}

void PromptDir::flush() {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return queue_.empty() && !busy_; });
}

PromptDirStats PromptDir::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

Status PromptDir::write_block(const Job& job, int64_t b) const {
  const int64_t ps = mine_.page_size;
  const size_t s = store_of(mine_, b);
  const SnapshotStore& st = mine_.stores[s];
  const int64_t pb = page_bytes(mine_, s);
  std::vector<uint8_t> f(kHeaderBytes + 4 * static_cast<size_t>(ps) +
                         static_cast<size_t>(st.n_layers * pb) + 8);
  uint8_t* o = f.data();
  auto out = [&o](const void* src, size_t n) {
    std::memcpy(o, src, n);
    o += n;
  };
  const uint32_t head32[2] = {kVersion, static_cast<uint32_t>(ps)};
  const uint64_t head64[3] = {ns_, job.keys[static_cast<size_t>(b)],
                              b == 0 ? 0 : job.keys[static_cast<size_t>(b - 1)]};
  const uint32_t where[2] = {static_cast<uint32_t>(s), static_cast<uint32_t>(st.n_layers)};
  out(kMagic, sizeof(kMagic));
  out(head32, sizeof(head32));
  out(head64, sizeof(head64));
  out(&b, sizeof(b));
  out(where, sizeof(where));
  out(&pb, sizeof(pb));
  out(job.tokens.data() + b * ps, 4 * static_cast<size_t>(ps));
  // export_seq's order: store, layer, page; pages per layer of store s for the job's tokens.
  const int64_t n_tok = static_cast<int64_t>(job.keys.size()) * ps;
  size_t base = 0;
  for (size_t x = 0; x < s; ++x)
    base += static_cast<size_t>(mine_.stores[x].n_layers) *
            static_cast<size_t>(snapshot_store_tokens(mine_.stores[x], n_tok) / ps);
  const int64_t n_pages = snapshot_store_tokens(st, n_tok) / ps;
  const int64_t p = (b * ps - st.begin) / ps;
  for (int l = 0; l < st.n_layers; ++l) {
    const std::vector<uint8_t>& pg = job.pages[base + static_cast<size_t>(l * n_pages + p)];
    if (static_cast<int64_t>(pg.size()) != pb)
      return invalid_argument("[prompt-cache] block {}: page of {} bytes, expected {}", b,
                              pg.size(), pb);
    out(pg.data(), pg.size());
  }
  const uint64_t sum = XXH3_64bits(f.data(), f.size() - 8);
  out(&sum, sizeof(sum));
  const std::string path = path_of(job.keys[static_cast<size_t>(b)]);
  return write_file_atomic(path, f);
}

void PromptDir::writer() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping with nothing left to write
    Job job = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lk.unlock();
    int64_t written = 0, failed = 0;
    for (int64_t b = job.first; b < static_cast<int64_t>(job.keys.size()); ++b) {
      const Status st = write_block(job, b);
      if (!st.ok()) {  // disk full, say: the blocks before it stay usable
        TKV_LOG_WARN("[prompt-cache] block not written: {}", st.message());
        ++failed;
        break;
      }
      ++written;
    }
    // The whole chain as used now, after the writes.
    const int64_t t_used = now_ns();
    for (int64_t b = 0; b < job.first + written; ++b)
      touch(path_of(job.keys[static_cast<size_t>(b)]), t_used, b);
    evict();
    lk.lock();
    stats_.writes += written;
    stats_.write_errors += failed;
    busy_ = false;
    cv_.notify_all();
  }
}

void PromptDir::evict() {
  struct Entry {
    fs::path path;
    int64_t bytes;
    fs::file_time_type mtime;
  };
  std::vector<Entry> all;
  int64_t total = 0;
  std::error_code ec;
  for (const auto& de : fs::directory_iterator(dir_, ec)) {
    uint64_t e_ns = 0, key = 0;
    if (!parse_entry_name(de.path().filename().string(), &e_ns, &key)) continue;
    std::error_code e2;
    const auto size = de.file_size(e2);
    const auto mtime = de.last_write_time(e2);
    if (e2) continue;  // removed meanwhile by another process
    all.push_back({de.path(), static_cast<int64_t>(size), mtime});
    total += static_cast<int64_t>(size);
  }
  int64_t evicted = 0;
  if (total > max_bytes_) {
    std::sort(all.begin(), all.end(),
              [](const Entry& a, const Entry& b) { return a.mtime < b.mtime; });
    for (const Entry& e : all) {
      if (total <= max_bytes_) break;
      if (fs::remove(e.path, ec)) ++evicted;
      total -= e.bytes;  // gone either way (another process may have removed it)
    }
  }
  std::lock_guard<std::mutex> lk(mu_);
  stats_.evictions += evicted;
  stats_.bytes = total;
}

}  // namespace tkv::kv
