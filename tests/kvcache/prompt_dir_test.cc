// The disk prompt cache's directory (PromptDir) without a model: blocks written
// from a small cache load back byte-exact into a fresh one, for every kind of
// store; a prompt sharing only its first pages gets those; reopening counts the
// blocks, sweeps dead writers' temp files and removes blocks of another layout
// under the same namespace; a corrupt block is never served; eviction is LRU
// and cuts chains from their end; a full disk keeps older blocks; and writers
// killed with SIGKILL at random points never leave a block that would load.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "kvcache/prefix_key.h"
#include "kvcache/prompt_dir.h"
#include "tests/kvcache/small_cache.h"

namespace tkv::kv {
namespace {
namespace fs = std::filesystem;
constexpr uint64_t kNs = 0x4242;
constexpr int kPs = 16;

std::vector<int32_t> tokens_for(uint32_t seed, int64_t n) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng() % 50000);
  return t;
}

std::vector<uint64_t> keys_of(const std::vector<int32_t>& t, int64_t n_blocks) {
  std::vector<uint64_t> k(static_cast<size_t>(n_blocks));
  prefix_block_keys(kNs, t.data(), n_blocks, kPs, k.data());
  return k;
}

SnapshotHeader mine_of(const KvCache& c) {
  SnapshotHeader h = c.snapshot_header().value();
  h.model_id = 7;
  return h;
}

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag)
      : path(fs::temp_directory_path() / ("tkv_pc_" + tag + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string str() const { return path.string(); }
  int files() const {
    int n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(path)) ++n;
    return n;
  }
};

// Writes the first n_blocks blocks of seq (holding tokens t) and waits for them.
void put_blocks(PromptDir& d, KvCache& c, int seq, const std::vector<int32_t>& t,
                int64_t n_blocks) {
  std::vector<std::vector<uint8_t>> pages;
  ASSERT_TRUE(c.export_seq(seq, n_blocks * kPs, &pages).ok());
  auto keys = keys_of(t, n_blocks);
  const int64_t first = d.count_present(keys.data(), n_blocks);
  d.put({t.begin(), t.begin() + n_blocks * kPs}, std::move(keys), first, std::move(pages));
  d.flush();
}

// Blocks of t that lookup serves (0 when none).
int64_t served_blocks(PromptDir& d, const std::vector<int32_t>& t) {
  const int64_t nb = (static_cast<int64_t>(t.size()) - 1) / kPs;
  const auto keys = keys_of(t, nb);
  auto snap = d.lookup(keys.data(), nb, 1, t.data());
  return snap ? snap->header.n_tokens() / kPs : 0;
}

struct Scheme {
  const char* name;
  int64_t quant_start;
};
class PromptDirScheme : public ::testing::TestWithParam<Scheme> {};

TEST_P(PromptDirScheme, BlocksLoadBackByteExactAndSharedFirstPagesAreServed) {
  const Scheme sc = GetParam();
  TempDir dir("rt");
  auto c = make(sc.name, sc.quant_start);
  const int seq = fill(*c, 80, 1);  // 5 full blocks
  std::vector<int32_t> t = tokens_for(1, 80);
  auto d = PromptDir::open(dir.str(), kNs, int64_t{1} << 30, mine_of(*c));
  ASSERT_TRUE(d.ok()) << d.status().message();
  put_blocks(*d.value(), *c, seq, t, 5);
  EXPECT_EQ(d.value()->stats().writes, 5);
  EXPECT_EQ(dir.files(), 5);

  // The same tokens and 7 more: all 5 blocks, as the original pages.
  std::vector<int32_t> prompt = t;
  for (int i = 0; i < 7; ++i) prompt.push_back(9 + i);
  const auto keys = keys_of(prompt, 5);
  auto snap = d.value()->lookup(keys.data(), 5, 1, prompt.data());
  ASSERT_TRUE(snap);
  ASSERT_EQ(snap->header.n_tokens(), 80);
  auto c2 = make(sc.name, sc.quant_start);
  const int s2 = c2->create_seq().value();
  ASSERT_TRUE(c2->import_seq(s2, *snap, 80).ok());
  std::vector<std::vector<uint8_t>> want, got;
  ASSERT_TRUE(c->export_seq(seq, 80, &want).ok());
  ASSERT_TRUE(c2->export_seq(s2, 80, &got).ok());
  EXPECT_TRUE(want == got);
  EXPECT_FALSE(d.value()->lookup(keys.data(), 5, 6, prompt.data())) << "min_blocks past the run";

  // A prompt sharing only the first 2 blocks gets those 2.
  std::vector<int32_t> other(t.begin(), t.begin() + 2 * kPs);
  for (int i = 0; i < 40; ++i) other.push_back(30000 + i);
  EXPECT_EQ(served_blocks(*d.value(), other), 2);
  EXPECT_EQ(d.value()->stats().hits, 2);
  EXPECT_EQ(d.value()->stats().tokens_loaded, 80 + 32);
}

INSTANTIATE_TEST_SUITE_P(Schemes, PromptDirScheme,
                         ::testing::Values(Scheme{"bf16", 0}, Scheme{"8", 0},
                                           Scheme{"turbo:k8v3", 0}, Scheme{"turbo:k4v3", 32}));

TEST(PromptDir, ReopenCountsSweepsAndRemovesAnotherLayout) {
  TempDir dir("reopen");
  auto c = make("turbo");
  const int seq = fill(*c, 48, 2);
  const auto t = tokens_for(2, 48);
  {
    auto d = PromptDir::open(dir.str(), kNs, int64_t{1} << 30, mine_of(*c));
    ASSERT_TRUE(d.ok());
    put_blocks(*d.value(), *c, seq, t, 3);
  }
  // Another namespace's block (left alone), a dead writer's temp file (swept),
  // a live writer's (this process: kept), a block under a wrong name (removed).
  {
    auto other = PromptDir::open(dir.str(), kNs + 1, int64_t{1} << 30, mine_of(*c));
    ASSERT_TRUE(other.ok());
    std::vector<std::vector<uint8_t>> pages;
    ASSERT_TRUE(c->export_seq(seq, kPs, &pages).ok());
    std::vector<uint64_t> k(1);
    prefix_block_keys(kNs + 1, t.data(), 1, kPs, k.data());
    other.value()->put({t.begin(), t.begin() + kPs}, k, 0, std::move(pages));
  }
  const auto keys = keys_of(t, 3);
  auto d0 = PromptDir::open(dir.str(), kNs, int64_t{1} << 30, mine_of(*c)).value();
  const std::string b0 = d0->path_of(keys[0]);
  d0.reset();
  std::ofstream(b0 + ".tmp.999999999") << "half";
  std::ofstream(b0 + ".tmp." + std::to_string(::getpid())) << "busy";
  fs::copy_file(b0, dir.path / "0000000000004242-00000000000000aa.tkvb");
  auto d = PromptDir::open(dir.str(), kNs, int64_t{1} << 30, mine_of(*c));
  ASSERT_TRUE(d.ok());
  const PromptDirStats st = d.value()->stats();
  EXPECT_EQ(st.entries, 3);
  EXPECT_EQ(st.swept_tmp, 1);
  EXPECT_EQ(st.skipped, 1);
  EXPECT_EQ(dir.files(), 3 + 1 + 1);           // ours, the other namespace's, the live temp file
  EXPECT_EQ(served_blocks(*d.value(), t), 2);  // (48 - 1) / 16: the last token is computed
  d.value().reset();

  // The same namespace with another layout: every block refused and removed.
  auto bf = make("bf16");
  auto d2 = PromptDir::open(dir.str(), kNs, int64_t{1} << 30, mine_of(*bf));
  ASSERT_TRUE(d2.ok());
  EXPECT_EQ(d2.value()->stats().skipped, 3);
  EXPECT_EQ(d2.value()->stats().entries, 0);
}

TEST(PromptDir, CorruptOrTruncatedBlocksAreNeverServed) {
  TempDir dir("corrupt");
  auto c = make("turbo");
  const int seq = fill(*c, 80, 3);
  const auto t = tokens_for(3, 80);
  auto d = PromptDir::open(dir.str(), kNs, int64_t{1} << 30, mine_of(*c)).value();
  put_blocks(*d, *c, seq, t, 5);
  const auto keys = keys_of(t, 5);
  {
    std::fstream f(d->path_of(keys[3]), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x5a');
  }
  std::vector<int32_t> prompt = t;
  prompt.push_back(1);
  EXPECT_EQ(served_blocks(*d, prompt), 3);
  EXPECT_EQ(d->stats().skipped, 1);
  EXPECT_FALSE(fs::exists(d->path_of(keys[3])));
  fs::resize_file(d->path_of(keys[1]), fs::file_size(d->path_of(keys[1])) - 1);
  EXPECT_EQ(served_blocks(*d, prompt), 1);
  EXPECT_EQ(d->stats().skipped, 2);
}

TEST(PromptDir, EvictionIsLeastRecentlyUsedFromTheEndOfChains) {
  TempDir dir("lru");
  auto c = make("bf16");
  const int sa = fill(*c, 80, 4), sb = fill(*c, 80, 5), sc = fill(*c, 80, 6);
  const auto ta = tokens_for(4, 80), tb = tokens_for(5, 80), tc = tokens_for(6, 80);
  int64_t block = 0;
  {
    auto probe = PromptDir::open(dir.str(), kNs, int64_t{1} << 30, mine_of(*c)).value();
    put_blocks(*probe, *c, sa, ta, 1);
    block = probe->stats().bytes;
  }
  ASSERT_GT(block, 0);
  auto d = PromptDir::open(dir.str(), kNs, 6 * block, mine_of(*c)).value();
  put_blocks(*d, *c, sa, ta, 4);
  put_blocks(*d, *c, sb, tb, 4);  // 8 blocks > 6: A's blocks 3 and 2 go
  EXPECT_EQ(d->stats().evictions, 2);
  EXPECT_EQ(served_blocks(*d, ta), 2);  // and refreshes A's first two blocks
  EXPECT_EQ(served_blocks(*d, tb), 4);
  EXPECT_EQ(served_blocks(*d, ta), 2);
  put_blocks(*d, *c, sc, tc, 2);  // 8 again: B's least recent are its blocks 3 and 2
  EXPECT_EQ(served_blocks(*d, tc), 2);
  EXPECT_EQ(served_blocks(*d, ta), 2);
  EXPECT_EQ(served_blocks(*d, tb), 2);
  EXPECT_LE(d->stats().bytes, 6 * block);
}

// A file size limit in a child makes every block write fail: the error is
// counted, the older blocks stay servable and no temp file is left.
TEST(PromptDirCrash, DiskFullKeepsOlderBlocks) {
  TempDir dir("full");
  auto c = make("bf16");
  const int sa = fill(*c, 48, 7), sb = fill(*c, 48, 8);
  const auto ta = tokens_for(7, 48), tb = tokens_for(8, 48);
  {
    auto d = PromptDir::open(dir.str(), kNs, int64_t{1} << 30, mine_of(*c)).value();
    put_blocks(*d, *c, sa, ta, 3);
  }
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit lim{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    auto d = PromptDir::open(dir.str(), kNs, int64_t{1} << 30, mine_of(*c));
    if (!d.ok()) ::_exit(3);
    put_blocks(*d.value(), *c, sb, tb, 3);
    const PromptDirStats st = d.value()->stats();
    ::_exit(st.writes == 0 && st.write_errors == 1 ? 0 : 2);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: a block was written or no error counted";
  auto d = PromptDir::open(dir.str(), kNs, int64_t{1} << 30, mine_of(*c)).value();
  EXPECT_EQ(d->stats().skipped, 0);
  EXPECT_EQ(served_blocks(*d, ta), 2);
  EXPECT_EQ(dir.files(), 3);
}

// Children write chains in a loop and are killed at random moments (120
// times); every block left in the directory must pass the checks at open, and
// a chain written before stays servable.
TEST(PromptDirCrash, KilledWritersNeverLeaveATornBlock) {
  TempDir dir("kill");
  auto c = make("turbo");
  const int keep = fill(*c, 48, 9);
  const auto tk = tokens_for(9, 48);
  {
    auto d = PromptDir::open(dir.str(), kNs, int64_t{1} << 30, mine_of(*c)).value();
    put_blocks(*d, *c, keep, tk, 3);
  }
  std::vector<int> seqs;
  for (uint32_t i = 0; i < 3; ++i) seqs.push_back(fill(*c, 64, 100 + i));
  std::mt19937 rng(42);
  const auto t0 = std::chrono::steady_clock::now();
  int kills = 0;
  for (; kills < 120; ++kills) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto d = PromptDir::open(dir.str(), kNs, int64_t{1} << 30, mine_of(*c));
      if (!d.ok()) ::_exit(3);
      for (uint32_t i = 0;; ++i) {  // new tokens each time: every chain is written
        const auto t = tokens_for(1000 * static_cast<uint32_t>(kills) + i, 64);
        put_blocks(*d.value(), *c, seqs[i % 3], t, 4);
      }
    }
    ::usleep(std::uniform_int_distribution<int>(0, 20000)(rng));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the writer failed by itself";
    auto d = PromptDir::open(dir.str(), kNs, int64_t{1} << 30, mine_of(*c)).value();
    ASSERT_EQ(d->stats().skipped, 0) << "kill " << kills << ": a torn block";
    ASSERT_EQ(served_blocks(*d, tk), 2);
    std::set<std::string> kept;
    for (uint64_t k : keys_of(tk, 3)) kept.insert(d->path_of(k));
    d.reset();
    for (const auto& e : fs::directory_iterator(dir.path))  // keep the directory small
      if (kept.count(e.path().string()) == 0) fs::remove(e.path());
    ASSERT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(120));
  }
  EXPECT_EQ(kills, 120);
}

}  // namespace
}  // namespace tkv::kv
