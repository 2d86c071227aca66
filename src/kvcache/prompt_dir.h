// PromptDir: the disk prompt cache (--prompt-cache DIR). Like the in-memory
// prefix cache it works on full pages: one file per block of page_size tokens,
// named by the namespace and the block's chained key (prefix_key.h),
// "<ns>-<key>.tkvb" in 16 hex digits each, holding the block's tokens and its
// pages in every layer exactly as the cache stores them (docs/kv-format.md,
// "Prompt-cache blocks"). The namespace hashes the model's content identity,
// the scheme and everything else that decides the KV bytes, so models and
// schemes never collide and a restarted process finds its blocks again; a
// prompt that shares only its first pages with an earlier one reuses those.
// The directory is the index: a lookup opens the blocks of a prompt in order
// until one is missing; a write renames a complete file into place
// (write_file_atomic), so processes sharing DIR never see half-written
// blocks, and every block is checked (checksum, namespace, key chain, tokens)
// before it is served. Blocks are evicted least recently used first (mtime,
// refreshed on each hit) once the directory's block files pass the size limit.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "kvcache/kv_store.h"

namespace tkv::kv {

struct PromptDirStats {
  int64_t entries = 0;                   // this namespace's block files found at open
  int64_t bytes = 0;                     // all block files in DIR after the last scan
  int64_t hits = 0;                      // lookups served from disk
  int64_t tokens_loaded = 0;             // tokens of those lookups
  int64_t writes = 0, write_errors = 0;  // block files
  int64_t writes_dropped = 0;            // sequences not written: the queue was full
  int64_t evictions = 0;
  int64_t skipped = 0;    // corrupt or foreign blocks refused (never served) and removed
  int64_t swept_tmp = 0;  // temp files of dead writers removed at open
};

class PromptDir {
 public:
  // Creates DIR if needed, removes temp files of writers no longer running,
  // checks each block file of namespace ns against `mine` (its header; a bad
  // one is removed and counted; checksums are checked when a block is read)
  // and evicts down to max_bytes. `mine` is the engine's snapshot header
  // (model identity, scheme, layout; no tokens); its stores must start on page
  // boundaries.
  static Result<std::unique_ptr<PromptDir>> open(const std::string& dir, uint64_t ns,
                                                 int64_t max_bytes, const SnapshotHeader& mine);
  // Finishes the writes still queued.
  ~PromptDir();
  PromptDir(const PromptDir&) = delete;
  PromptDir& operator=(const PromptDir&) = delete;

  // keys[b]: the chained key of block b of tokens (prefix_block_keys with ns).
  // The blocks 0..b-1 found in order, as one snapshot of b * page_size tokens,
  // when b >= min_blocks; else nullptr. A block that fails a check is removed
  // and counted, and ends the run.
  std::shared_ptr<const Snapshot> lookup(const uint64_t* keys, int64_t n_blocks, int64_t min_blocks,
                                         const int32_t* tokens);
  // Blocks at the start of keys[0, n_blocks) that have a file (no reads).
  int64_t count_present(const uint64_t* keys, int64_t n_blocks) const;
  // Queues blocks [first, n_blocks) of a sequence for the writer thread.
  // pages: export_seq's pages of n_blocks * page_size tokens (file order).
  // Dropped (and counted) when kMaxQueued sequences are already waiting.
  void put(std::vector<int32_t> tokens, std::vector<uint64_t> keys, int64_t first,
           std::vector<std::vector<uint8_t>> pages);
  // Blocks until the queue is empty (tests, shutdown).
  void flush();
  PromptDirStats stats() const;
  std::string path_of(uint64_t key) const;

  static constexpr int kMaxQueued = 4;

 private:
  PromptDir() = default;
  struct Job {
    std::vector<int32_t> tokens;
    std::vector<uint64_t> keys;
    int64_t first = 0;
    std::vector<std::vector<uint8_t>> pages;
  };
  void writer();
  Status write_block(const Job& job, int64_t b) const;
  // Block b read and checked against its key, parent key and tokens.
  Result<std::vector<uint8_t>> read_block(uint64_t key, uint64_t parent, int64_t b,
                                          const int32_t* tokens) const;
  void evict();  // down to max_bytes_, oldest mtime first, all block files in DIR

  std::string dir_;
  uint64_t ns_ = 0;
  int64_t max_bytes_ = 0;
  SnapshotHeader mine_;
  int64_t block_bytes_ = 0;  // page bytes of one block, all layers of its store

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;  // guarded by mu_
  bool busy_ = false;      // guarded by mu_: a job is being written
  bool stop_ = false;      // guarded by mu_
  PromptDirStats stats_;   // guarded by mu_
  std::thread thread_;
};

}  // namespace tkv::kv
