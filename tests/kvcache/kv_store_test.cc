// kv-store without a model: snapshots of small caches of every scheme round-trip
// (export -> encode -> decode -> import -> export gives the same bytes, and
// attention over the imported sequence equals attention over the original);
// every truncation and every flipped byte is refused; the compatibility check
// names each mismatch; and a writer killed with SIGKILL at random points while
// replacing a snapshot always leaves the old or the new complete file.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>

#include "base/thread_pool.h"
#include "kvcache/kv_cache.h"
#include "kvcache/kv_store.h"
#include "ops/attention.h"
#include "tests/kvcache/small_cache.h"

namespace tkv::kv {
namespace {
namespace fs = std::filesystem;

std::vector<uint8_t> snapshot_of(KvCache& c, int seq, int64_t n, uint64_t model_id = 7) {
  SnapshotHeader h = c.snapshot_header().value();
  h.model_id = model_id;
  for (int64_t i = 0; i < n; ++i) h.tokens.push_back(static_cast<int32_t>(100 + i));
  std::vector<std::vector<uint8_t>> pages;
  EXPECT_TRUE(c.export_seq(seq, n, &pages).ok());
  auto b = encode_snapshot(h, pages);
  EXPECT_TRUE(b.ok()) << b.status().message();
  return b.ok() ? b.value() : std::vector<uint8_t>{};
}

// Attention of one query over seq (layer l), for comparing two sequences.
std::vector<float> attend(KvCache& c, int seq, int l) {
  const KvShape& s = c.shape();
  const int64_t n = c.seq_len(seq);
  const int n_heads = s.n_kv_heads * 2;
  std::vector<float> q(static_cast<size_t>(n_heads * s.head_dim), 0.25f), out(q.size());
  for (size_t i = 0; i < q.size(); ++i) q[i] = 0.01f * static_cast<float>(i % 17) - 0.05f;
  kernels::AttnArgs a;
  a.q = q.data();
  a.out = out.data();
  a.n_q = 1;
  a.q_pos0 = n - 1;
  a.n_heads = n_heads;
  a.scale = 0.125f;
  ThreadPool pool(1);
  EXPECT_TRUE(ops::attention(a, c.view(l, seq, n), ops::AttnMode::kFused, nullptr, pool).ok());
  return out;
}

class KvStoreScheme : public ::testing::TestWithParam<const char*> {};

TEST_P(KvStoreScheme, RoundTripIsByteExactAndAttendsTheSame) {
  for (int64_t qs : {int64_t{0}, int64_t{32}}) {
    if (qs > 0 && (std::string(GetParam()) == "bf16" || std::string(GetParam()) == "f16")) continue;
    auto c = make(GetParam(), qs);
    ASSERT_TRUE(c);
    for (int64_t n : {int64_t{1}, int64_t{16}, int64_t{37}, int64_t{100}}) {
      const int src = fill(*c, n, static_cast<uint32_t>(n));
      const std::vector<uint8_t> bytes = snapshot_of(*c, src, n);
      auto snap = decode_snapshot(bytes.data(), bytes.size(), "t");
      ASSERT_TRUE(snap.ok()) << snap.status().message();
      EXPECT_EQ(snap.value().header.n_tokens(), n);
      const int dst = c->create_seq().value();
      ASSERT_TRUE(c->import_seq(dst, snap.value(), n).ok());
      EXPECT_EQ(c->seq_len(dst), n);
      EXPECT_EQ(snapshot_of(*c, dst, n), bytes);
      for (int l = 0; l < 3; ++l) EXPECT_EQ(attend(*c, dst, l), attend(*c, src, l));
      // A prefix of the snapshot: the first m tokens only.
      const int64_t m = n / 2;
      const int part = c->create_seq().value();
      ASSERT_TRUE(c->import_seq(part, snap.value(), m).ok());
      std::vector<std::vector<uint8_t>> a, b;
      ASSERT_TRUE(c->export_seq(part, m, &a).ok());
      ASSERT_TRUE(c->export_seq(src, m, &b).ok());
      EXPECT_EQ(a, b);
      for (int s : {src, dst, part}) c->free_seq(s);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Schemes, KvStoreScheme,
                         ::testing::Values("bf16", "f16", "8", "4", "turbo", "turbo:k8v4",
                                           "turbo:k4v3"));

TEST(KvStore, EveryTruncationAndEveryFlippedByteIsRefused) {
  auto c = make("turbo");
  const int seq = fill(*c, 21, 1);
  const std::vector<uint8_t> good = snapshot_of(*c, seq, 21);
  for (size_t n = 0; n < good.size(); ++n) {
    auto r = decode_snapshot(good.data(), n, "t");
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_NE(r.status().message().find("truncated"), std::string::npos)
        << n << ": " << r.status().message();
  }
  std::vector<uint8_t> longer = good;
  longer.push_back(0);
  EXPECT_NE(
      decode_snapshot(longer.data(), longer.size(), "t").status().message().find("past the end"),
      std::string::npos);
  for (size_t i = 0; i < good.size(); i += 7) {
    std::vector<uint8_t> b = good;
    b[i] ^= 0x04;
    EXPECT_FALSE(decode_snapshot(b.data(), b.size(), "t").ok()) << "byte " << i;
  }
}

// Mutations behind the checksums (resealed, as the fuzz target does): whatever
// decodes must import and export back to the same pages, or be refused cleanly.
TEST(KvStore, ResealedMutationsDecodeConsistentlyOrAreRefused) {
  auto c = make("turbo", 16);
  const int seq = fill(*c, 40, 2);
  const std::vector<uint8_t> good = snapshot_of(*c, seq, 40);
  SnapshotHeader mine = c->snapshot_header().value();
  mine.model_id = 7;
  std::mt19937 rng(5);
  int decoded = 0;
  for (int it = 0; it < 3000; ++it) {
    std::vector<uint8_t> b = good;
    const int n_mut = 1 + static_cast<int>(rng() % 3);
    for (int m = 0; m < n_mut; ++m) {
      const size_t at = rng() % std::min<size_t>(b.size(), it % 2 ? b.size() : 400);
      b[at] = static_cast<uint8_t>(rng());
    }
    if (it % 7 == 0) b.resize(rng() % b.size());
    reseal_snapshot(&b);
    auto r = decode_snapshot(b.data(), b.size(), "m");
    if (!r.ok()) {
      EXPECT_EQ(r.status().message().rfind("[kv-store] m", 0), 0u) << r.status().message();
      continue;
    }
    ++decoded;
    if (!check_snapshot_compatible(r.value().header, mine, "m").ok()) continue;
    const int dst = c->create_seq().value();
    const int64_t n = r.value().header.n_tokens();
    if (c->import_seq(dst, r.value(), n).ok()) {
      std::vector<std::vector<uint8_t>> pages;
      ASSERT_TRUE(c->export_seq(dst, n, &pages).ok());
      std::vector<uint8_t> flat;
      for (const auto& p : pages) flat.insert(flat.end(), p.begin(), p.end());
      EXPECT_EQ(flat, r.value().data);
    }
    c->free_seq(dst);
  }
  EXPECT_GT(decoded, 100);
}

TEST(KvStore, CompatibilityNamesEachMismatch) {
  auto turbo = make("turbo");
  auto k8v4 = make("turbo:k8v4");
  auto bf16 = make("bf16");
  auto qs = make("turbo", 32);
  SnapshotHeader t = turbo->snapshot_header().value();
  const auto msg = [&](const SnapshotHeader& mine) {
    return check_snapshot_compatible(t, mine, "f").message();
  };
  EXPECT_TRUE(check_snapshot_compatible(t, t, "f").ok());
  EXPECT_NE(msg(bf16->snapshot_header().value())
                .find("snapshot is for scheme turbo:k8v3 (turbo), this engine runs bf16 (bf16)"),
            std::string::npos);
  EXPECT_NE(msg(k8v4->snapshot_header().value())
                .find("snapshot is for bits k8v3 (turbo:k8v3), this engine runs k8v4 (turbo:k8v4)"),
            std::string::npos);
  EXPECT_NE(msg(qs->snapshot_header().value())
                .find("snapshot is for scheme turbo:k8v3, this "
                      "engine runs turbo:k8v3+bf16<32"),
            std::string::npos);
  SnapshotHeader m = t;
  m.model_id = 5;
  EXPECT_NE(msg(m).find("snapshot is for model 0000000000000000, this engine runs "
                        "0000000000000005"),
            std::string::npos);
  m = t;
  m.key_center = !t.key_center;
  EXPECT_NE(msg(m).find("key centering"), std::string::npos);
  m = t;
  m.page_size = 32;
  EXPECT_NE(msg(m).find("snapshot is for page size 16, this engine runs 32"), std::string::npos);
}

TEST(KvStore, ImportWithoutRoomChangesNothing) {
  CacheOptions o;
  o.scheme = parse_kv_quant("turbo").value();
  o.page_size = 16;
  o.max_tokens = 64;
  o.max_seqs = 2;
  o.max_chunk_tokens = 64;
  o.budget_bytes = size_t{64} << 20;
  auto c = create_cache(small_shape(), o).value();
  const int a = fill(*c, 60, 3);
  const auto bytes = snapshot_of(*c, a, 60);
  auto snap = decode_snapshot(bytes.data(), bytes.size(), "t").value();
  const int b = c->create_seq().value();
  const Status st = c->import_seq(b, snap, 60);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("no room"), std::string::npos);
  EXPECT_EQ(c->seq_len(b), 0);
  EXPECT_EQ(snapshot_of(*c, a, 60), bytes);
}

// The fuzz seeds (tests/fuzz/make_kv_store_seeds.py) are valid snapshots once
// resealed, so the fuzzer starts past the checksums; version2 is the refusal seed.
TEST(KvStore, FuzzSeedsDecode) {
  const fs::path dir = fs::path(TKV_SOURCE_DIR) / "tests/fuzz/corpus/kv_store_fuzz";
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::vector<uint8_t> b = read_whole_file(e.path().string()).value();
    ASSERT_FALSE(b.empty());
    b.erase(b.begin());  // the control byte
    reseal_snapshot(&b);
    auto r = decode_snapshot(b.data(), b.size(), "seed");
    if (e.path().filename() == "version2.tkv")
      EXPECT_NE(r.status().message().find("format version 2"), std::string::npos);
    else
      EXPECT_TRUE(r.ok()) << e.path() << ": " << r.status().message();
    ++n;
  }
  EXPECT_GE(n, 6);
}

// A full disk (a file size limit in a child) fails the write with an error,
// leaves the old snapshot intact and no temp file behind.
TEST(KvStoreCrash, DiskFullKeepsTheOldSnapshot) {
  auto c = make("bf16");
  const int s1 = fill(*c, 10, 21), s2 = fill(*c, 200, 22);
  const std::vector<uint8_t> small = snapshot_of(*c, s1, 10), big = snapshot_of(*c, s2, 200);
  ASSERT_LT(small.size(), size_t{64} << 10);
  ASSERT_GT(big.size(), size_t{64} << 10);
  const fs::path dir = fs::temp_directory_path() / ("tkv_full_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string target = (dir / "snap.tkv").string();
  ASSERT_TRUE(write_file_atomic(target, small).ok());
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit lim{64 << 10, 64 << 10};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    const Status st = write_file_atomic(target, big);
    ::_exit(st.ok() ? 1 : st.message().find("cannot write") != std::string::npos ? 0 : 2);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the write succeeded, 2: another error";
  EXPECT_EQ(read_whole_file(target).value(), small);
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 1);  // no temp file left
  fs::remove_all(dir);
}

// A child rewrites the target with snapshot A or B in a loop and is killed at a
// random moment; the target must then hold A or B, whole.
TEST(KvStoreCrash, KilledWriterLeavesTheOldOrTheNewSnapshot) {
  auto c = make("bf16");
  const int s1 = fill(*c, 200, 11), s2 = fill(*c, 150, 12);
  const std::vector<uint8_t> a = snapshot_of(*c, s1, 200), b = snapshot_of(*c, s2, 150);
  const fs::path dir = fs::temp_directory_path() / ("tkv_crash_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string target = (dir / "snap.tkv").string();
  ASSERT_TRUE(write_file_atomic(target, a).ok());
  std::mt19937 rng(42);
  const auto t0 = std::chrono::steady_clock::now();
  int kills = 0, saw_a = 0, saw_b = 0;
  for (; kills < 120; ++kills) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      for (uint64_t i = 0;; ++i)
        if (!write_file_atomic(target, (i & 1) ? a : b).ok()) ::_exit(3);
    }
    ::usleep(std::uniform_int_distribution<int>(0, 20000)(rng));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the writer failed by itself";
    auto got = read_whole_file(target);
    ASSERT_TRUE(got.ok());
    ASSERT_TRUE(got.value() == a || got.value() == b) << "kill " << kills << ": a torn file";
    ASSERT_TRUE(read_snapshot(target).ok());
    (got.value() == a ? saw_a : saw_b)++;
    ASSERT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60));
  }
  EXPECT_EQ(kills, 120);
  EXPECT_GT(saw_a + saw_b, 0);
  fs::remove_all(dir);  // the killed writers' temp files too
}

}  // namespace
}  // namespace tkv::kv
