// The base-logits cache trusts nothing it reads: each kind of bad file (bad magic,
// truncated, a flipped byte, impossible log-probabilities, a malformed header) is
// rejected with a message naming the problem, and the writer leaves no temporary
// file behind, finished or not.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <gtest/gtest.h>

#include "eval/base_logits.h"

namespace tkv::eval {
namespace {

constexpr int kVocab = 300;
const TruncationParams kTrunc{0.95, 4, 64};

class BaseCache : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(testing::TempDir()) /
           ("tkv_base_cache_" +
            std::string(testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "m.tkvbase").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void write_valid(int n = 4) {
    auto w = BaseLogitsWriter::create(path_, "key", kVocab, kTrunc);
    ASSERT_TRUE(w.ok()) << w.status().message();
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.f, 3.f);
    for (int i = 0; i < n; ++i) {
      std::vector<float> logits(kVocab);
      for (float& x : logits) x = nd(rng);
      ASSERT_TRUE(w.value()->append(truncate_dist(logits.data(), kVocab, i, kTrunc)).ok());
    }
    ASSERT_TRUE(w.value()->finish().ok());
  }
  std::string bytes() const {
    std::ifstream f(path_, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  void store(const std::string& b) const {
    std::ofstream f(path_, std::ios::binary | std::ios::trunc);
    f << b;
  }
  // Offset of the first record's fields (header = 16 + key + 48 bytes).
  size_t payload() const { return 16 + 3 + 48; }
  std::string open_error() const {
    auto r = BaseLogitsReader::open(path_, "key", kVocab);
    return r.ok() ? "" : r.status().message();
  }
  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(BaseCache, ValidFileOpensAndReadsBack) {
  write_valid();
  EXPECT_EQ(open_error(), "");
  auto r = BaseLogitsReader::open(path_, "key", kVocab);
  ASSERT_TRUE(r.ok());
  TruncatedDist d;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(r.value()->next(&d).ok());
  EXPECT_FALSE(r.value()->next(&d).ok());
}

TEST_F(BaseCache, BadMagic) {
  write_valid();
  std::string b = bytes();
  b[0] = 'X';
  store(b);
  EXPECT_NE(open_error().find("bad magic"), std::string::npos) << open_error();
}

TEST_F(BaseCache, Truncated) {
  write_valid();
  const std::string b = bytes();
  store(b.substr(0, b.size() - 5));
  EXPECT_NE(open_error().find("checksum mismatch"), std::string::npos) << open_error();
  store(b.substr(0, payload() + 10));  // header intact, records cut
  EXPECT_NE(open_error().find("truncated"), std::string::npos) << open_error();
  store(b.substr(0, 20));
  EXPECT_NE(open_error().find("truncated header"), std::string::npos) << open_error();
}

TEST_F(BaseCache, FlippedByteIsAChecksumError) {
  write_valid();
  const std::string good = bytes();
  for (size_t at : {good.size() - 1, payload() + 30, size_t{20}}) {
    std::string b = good;
    b[at] ^= 0x10;
    store(b);
    EXPECT_NE(open_error().find("checksum mismatch"), std::string::npos)
        << "byte " << at << ": " << open_error();
  }
}

TEST_F(BaseCache, ImpossibleLogProbabilities) {
  write_valid();
  const std::string good = bytes();
  // First record: target, argmax, target_logp, tail_mass, k, ids[k], logp[k].
  uint32_t k = 0;
  std::memcpy(&k, good.data() + payload() + 20, 4);
  ASSERT_GT(k, 0u);
  const size_t logp0 = payload() + 24 + 4 * k;
  for (float bad : {std::nanf(""), 0.5f, INFINITY}) {
    std::string b = good;
    std::memcpy(b.data() + logp0, &bad, 4);
    ASSERT_TRUE(reseal_base_logits(&b));  // valid checksums: the range check must catch it
    store(b);
    EXPECT_NE(open_error().find("log-probability not finite or > 0"), std::string::npos)
        << bad << ": " << open_error();
  }
  // Probabilities that do not sum to 1: the tail mass doubled.
  std::string b = good;
  double tail = 0;
  std::memcpy(&tail, b.data() + payload() + 12, 8);
  tail += 0.5;
  std::memcpy(b.data() + payload() + 12, &tail, 8);
  ASSERT_TRUE(reseal_base_logits(&b));
  store(b);
  EXPECT_NE(open_error().find("not 1 within"), std::string::npos) << open_error();
  // A token id outside the vocabulary.
  b = good;
  const int32_t id = kVocab + 5;
  std::memcpy(b.data() + payload() + 24, &id, 4);
  ASSERT_TRUE(reseal_base_logits(&b));
  store(b);
  EXPECT_NE(open_error().find("token id out of range"), std::string::npos) << open_error();
}

TEST_F(BaseCache, MalformedHeader) {
  write_valid();
  const std::string good = bytes();
  std::string b = good;
  const uint32_t version = 1;
  std::memcpy(b.data() + 8, &version, 4);
  store(b);
  EXPECT_NE(open_error().find("version 1 (valid: 2)"), std::string::npos) << open_error();
  b = good;
  const uint32_t key_len = 1u << 30;
  std::memcpy(b.data() + 12, &key_len, 4);
  store(b);
  EXPECT_NE(open_error().find("key length"), std::string::npos) << open_error();
  b = good;
  const int64_t n_pos = -3;
  std::memcpy(b.data() + 16 + 3 + 24, &n_pos, 8);
  ASSERT_TRUE(reseal_base_logits(&b));
  store(b);
  EXPECT_NE(open_error().find("header field out of range"), std::string::npos) << open_error();
  b = good;
  const double mass = std::nan("");
  std::memcpy(b.data() + 16 + 3 + 16, &mass, 8);
  ASSERT_TRUE(reseal_base_logits(&b));
  store(b);
  EXPECT_NE(open_error().find("header field out of range"), std::string::npos) << open_error();
  b = good;
  // Large enough that n_positions * record size overflows int64 (found by eval_cache_fuzz).
  const int64_t many = INT64_MAX / 2;
  std::memcpy(b.data() + 16 + 3 + 24, &many, 8);
  ASSERT_TRUE(reseal_base_logits(&b));
  store(b);
  EXPECT_NE(open_error().find("truncated"), std::string::npos) << open_error();
}

TEST_F(BaseCache, OtherKeyOrVocabulary) {
  write_valid();
  auto r = BaseLogitsReader::open(path_, "other", kVocab);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(BaseLogitsReader::open(path_, "key", kVocab + 1).ok());
}

TEST_F(BaseCache, AtomicWriteLeavesNoTemporaryFile) {
  write_valid();
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir_))
    names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"m.tkvbase"});
  // An abandoned write (no finish) removes its temporary and keeps the old file.
  const std::string before = bytes();
  {
    auto w = BaseLogitsWriter::create(path_, "key2", kVocab, kTrunc);
    ASSERT_TRUE(w.ok());
    int files = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir_)) ++files;
    EXPECT_EQ(files, 2);  // the temporary sits beside the destination
  }
  names.clear();
  for (const auto& e : std::filesystem::directory_iterator(dir_))
    names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"m.tkvbase"});
  EXPECT_EQ(bytes(), before);
}

TEST(BaseHash, ContentNotName) {
  const std::string a = testing::TempDir() + "/tkv_hash_a.bin";
  const std::string b = testing::TempDir() + "/tkv_hash_b.bin";
  std::ofstream(a, std::ios::binary) << "same bytes";
  std::ofstream(b, std::ios::binary) << "same bytez";  // same name length and size
  auto ha = hash_file(a), hb = hash_file(b);
  ASSERT_TRUE(ha.ok() && hb.ok());
  EXPECT_NE(ha.value(), hb.value());
  EXPECT_EQ(ha.value(), hash_bytes("same bytes"));
  EXPECT_FALSE(hash_file(testing::TempDir() + "/tkv_hash_missing.bin").ok());
}

}  // namespace
}  // namespace tkv::eval
