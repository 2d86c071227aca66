// KV session snapshots through the public API on SmolLM2-135M
// (Request::save_session / load_session, docs/kv-format.md "Snapshots"):
// a request saves its KV, a fresh engine loads it under a longer prompt that
// continues it, and the next greedy tokens and their logprobs (the logits'
// log-softmax, top 20) equal an uninterrupted cold run bit for bit; every kind
// of mismatch or damage is refused at submit with its own message, and the
// engine then serves a normal request identically.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "tests/api/api_test_util.h"

namespace turbokv {
namespace {
using namespace turbokv::testing;
namespace fs = std::filesystem;

std::string temp_path(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("tkv_session_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}

std::vector<uint8_t> read_bytes(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
void write_bytes(const std::string& p, const std::vector<uint8_t>& b) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// The header checksum recomputed as kv_store.cc does (XXH3-64 over the header).
std::vector<uint8_t> rechecksum(std::vector<uint8_t> b, uint32_t header_bytes) {
  const uint64_t h = XXH3_64bits(b.data(), header_bytes);
  std::memcpy(b.data() + header_bytes, &h, sizeof(h));
  return b;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<std::vector<TokenLogprob>> top;
  std::vector<float> logprob;
  Timings timings;
  std::string session_error;
  int64_t session_tokens = 0;
};

Result<Outcome> run(Engine& e, Request r) {
  Outcome out;
  r.logprobs = 20;
  r.on_token = [&out](const Event& ev) {
    if (ev.token >= 0) {
      out.tokens.push_back(ev.token);
      out.top.push_back(ev.top_logprobs);
      out.logprob.push_back(ev.logprob);
    }
    if (ev.is_final()) {
      out.timings = ev.timings;
      out.session_error = ev.session_error;
      out.session_tokens = ev.session_tokens;
    }
  };
  auto h = e.submit(r);
  if (!h.ok()) return h.status();
  h.value().wait();
  return out;
}

void expect_same(const Outcome& a, const Outcome& b) {
  EXPECT_EQ(a.tokens, b.tokens);
  ASSERT_EQ(a.top.size(), b.top.size());
  for (size_t i = 0; i < a.top.size(); ++i) {
    EXPECT_EQ(a.logprob[i], b.logprob[i]) << "token " << i;  // bit-equal: same pages, same kernels
    ASSERT_EQ(a.top[i].size(), b.top[i].size());
    for (size_t j = 0; j < a.top[i].size(); ++j) {
      EXPECT_EQ(a.top[i][j].token, b.top[i][j].token) << i << "," << j;
      EXPECT_EQ(a.top[i][j].logprob, b.top[i][j].logprob) << i << "," << j;
    }
  }
}

EngineConfig config_for(const char* scheme) {
  EngineConfig cfg = smollm2_config(1024, 2);
  cfg.kv = KvConfig::parse(scheme).value();
  cfg.prefix_cache = false;  // only the snapshot may supply KV
  return cfg;
}

class SessionRoundTrip : public ::testing::TestWithParam<const char*> {};

TEST_P(SessionRoundTrip, LoadedSessionContinuesLikeAnUninterruptedRun) {
  TKV_REQUIRE_SMOLLM2();
  const std::string path = temp_path(std::string("rt_") + GetParam() + ".tkv");
  const EngineConfig cfg = config_for(GetParam());
  std::vector<int32_t> p, s;
  Outcome first;
  {
    auto a = make_engine(cfg);
    ASSERT_TRUE(a);
    p = prompt_of(a->tokenizer(), 150, 3);
    s = a->tokenizer().encode(" Then the bell rang twice and everyone turned to the door.", false);
    Request r = greedy(p, 8);
    r.save_session = path;
    auto f = run(*a, r);
    ASSERT_TRUE(f.ok()) << f.status().message();
    first = f.value();
    ASSERT_EQ(first.session_error, "");
    EXPECT_EQ(first.session_tokens, 150 + 8 - 1);  // the last sampled token has no KV
  }
  const auto q = concat(concat(p, first.tokens), s);
  auto cold = make_engine(cfg);
  ASSERT_TRUE(cold);
  auto want = run(*cold, greedy(q, 12));
  ASSERT_TRUE(want.ok());
  cold.reset();

  auto b = make_engine(cfg);  // fresh engine, nothing computed
  ASSERT_TRUE(b);
  Request r = greedy(q, 12);
  r.load_session = path;
  auto got = run(*b, r);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got.value().timings.cached_tokens, 157);
  EXPECT_EQ(got.value().timings.prefill_tokens, static_cast<int64_t>(q.size()) - 157);
  expect_same(got.value(), want.value());

  // The exact saved tokens as the prompt: all but the last are loaded.
  const std::vector<int32_t> exact(q.begin(), q.begin() + 157);
  Request r2 = greedy(exact, 4);
  r2.load_session = path;
  auto again = run(*b, r2);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again.value().timings.cached_tokens, 156);
  fs::remove(path);
}

// Every scheme; under the sanitizers (slow e2e) one float and one turbo scheme.
const std::vector<const char*> kSchemes =
    kSanitized
        ? std::vector<const char*>{"bf16", "turbo:k4v3"}
        : std::vector<const char*>{"bf16", "f16", "8", "4", "turbo", "turbo:k8v4", "turbo:k4v3"};
INSTANTIATE_TEST_SUITE_P(Schemes, SessionRoundTrip, ::testing::ValuesIn(kSchemes),
                         [](const auto& param_info) {
                           std::string n = param_info.param;
                           for (char& c : n)
                             if (c == ':') c = '_';
                           return n;
                         });

// Refusals: each with its own message; a refused request changes nothing.
// One engine and snapshot for the whole suite (engines are slow to build under
// the sanitizers); every test leaves the engine as it found it.
class SessionRefusal : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!tkv::testing::have(tkv::testing::smollm2_path())) return;
    path_ = temp_path("good.tkv");
    eng_ = make_engine(config_for("turbo"));
    if (!eng_) return;
    p_ = prompt_of(eng_->tokenizer(), 100, 5);
    Request r = greedy(p_, 4);
    r.save_session = path_;
    auto f = run(*eng_, r);
    if (!f.ok() || !f.value().session_error.empty()) return;
    good_ = read_bytes(path_);
    normal_ = run(*eng_, greedy(p_, 6)).value();
  }
  static void TearDownTestSuite() { eng_.reset(); }
  void SetUp() override {
    if (!tkv::testing::have(tkv::testing::smollm2_path()))
      GTEST_SKIP() << "SmolLM2 not fetched (scripts/fetch-models smollm2)";
    ASSERT_TRUE(eng_ && !good_.empty() && !normal_.tokens.empty());
  }
  // Submits a load of `bytes` under a prompt continuing the snapshot.
  static std::string refuse(const std::vector<uint8_t>& bytes, Engine* e = nullptr,
                            std::vector<int32_t> prompt = {}) {
    const std::string bad = temp_path("bad.tkv");
    write_bytes(bad, bytes);
    Request r = greedy(prompt.empty() ? p_ : prompt, 4);
    r.load_session = bad;
    auto h = (e ? e : eng_.get())->submit(r);
    EXPECT_FALSE(h.ok());
    return h.ok() ? "" : h.status().message();
  }
  static void expect_still_serves() { expect_same(run(*eng_, greedy(p_, 6)).value(), normal_); }
  template <class T>
  static std::vector<uint8_t> patched(size_t off, T v) {
    std::vector<uint8_t> b = good_;
    std::memcpy(b.data() + off, &v, sizeof(v));
    return b;
  }
  static inline std::string path_;
  static inline std::unique_ptr<Engine> eng_;
  static inline std::vector<int32_t> p_;
  static inline std::vector<uint8_t> good_;
  static inline Outcome normal_;
};

// Offsets of the v1 header (kv_store.cc): magic 0, version 8, header_bytes 12, model_id 16.
TEST_F(SessionRefusal, AnotherFormatVersion) {
  EXPECT_NE(refuse(patched<uint32_t>(8, 2))
                .find("snapshot format version 2, this build reads "
                      "version 1"),
            std::string::npos);
  expect_still_serves();
}

TEST_F(SessionRefusal, BadHeaderChecksum) {
  EXPECT_NE(refuse(patched<uint8_t>(20, good_[20] ^ 1)).find("header checksum mismatch"),
            std::string::npos);
  expect_still_serves();
}

TEST_F(SessionRefusal, BadPageChecksum) {
  std::vector<uint8_t> b = good_;
  b[b.size() - 100] ^= 0x10;
  EXPECT_NE(refuse(b).find("fails its checksum"), std::string::npos);
  expect_still_serves();
}

TEST_F(SessionRefusal, TruncatedFile) {
  std::vector<uint8_t> b(good_.begin(), good_.end() - 1000);
  EXPECT_NE(refuse(b).find("truncated snapshot"), std::string::npos);
  std::vector<uint8_t> tiny(good_.begin(), good_.begin() + 30);
  EXPECT_NE(refuse(tiny).find("truncated snapshot"), std::string::npos);
  expect_still_serves();
}

TEST_F(SessionRefusal, NotASnapshot) {
  std::vector<uint8_t> b = good_;
  b[0] = 'X';
  EXPECT_NE(refuse(b).find("not a turbokv KV snapshot"), std::string::npos);
  EXPECT_NE(refuse({}).find("truncated snapshot"), std::string::npos);
}

TEST_F(SessionRefusal, AnotherModelIdentity) {
  // A patched model id with a recomputed header checksum: only the identity differs.
  std::vector<uint8_t> b = patched<uint64_t>(16, 0x1234);
  uint32_t header_bytes = 0;
  std::memcpy(&header_bytes, b.data() + 12, 4);
  b = rechecksum(b, header_bytes);
  const std::string msg = refuse(b);
  EXPECT_NE(msg.find("snapshot is for model 0000000000001234, this engine runs"), std::string::npos)
      << msg;
  expect_still_serves();
}

TEST_F(SessionRefusal, AnotherSchemeAndOtherBits) {
  auto bf16 = make_engine(config_for("bf16"));
  ASSERT_TRUE(bf16);
  EXPECT_NE(refuse(good_, bf16.get())
                .find("snapshot is for scheme turbo:k8v3 (turbo), this engine "
                      "runs bf16 (bf16)"),
            std::string::npos);
  bf16.reset();
  auto k8v4 = make_engine(config_for("turbo:k8v4"));
  ASSERT_TRUE(k8v4);
  EXPECT_NE(refuse(good_, k8v4.get())
                .find("snapshot is for bits k8v3 (turbo:k8v3), this engine "
                      "runs k8v4 (turbo:k8v4)"),
            std::string::npos);
  k8v4.reset();
  expect_still_serves();
}

TEST_F(SessionRefusal, TokensNotAPrefixOfThePrompt) {
  std::vector<int32_t> other = prompt_of(eng_->tokenizer(), 120, 6);
  EXPECT_NE(refuse(good_, nullptr, other).find("are not a prefix of the prompt"),
            std::string::npos);
  std::vector<int32_t> shorter(p_.begin(), p_.begin() + 50);
  EXPECT_NE(refuse(good_, nullptr, shorter).find("are not a prefix of the prompt"),
            std::string::npos);
  expect_still_serves();
}

// load_session_common (the server's restored slots): the tokens the snapshot
// and the prompt start with are loaded, the rest prefilled; output unchanged.
TEST_F(SessionRefusal, LoadCommonUsesTheSharedPrefix) {
  auto load_common = [](std::vector<int32_t> prompt) {
    Request r = greedy(prompt, 4);
    r.load_session = path_;
    r.load_session_common = true;
    auto got = run(*eng_, r);
    EXPECT_TRUE(got.ok()) << got.status().message();
    expect_same(got.value(), run(*eng_, greedy(prompt, 4)).value());
    return got.value().timings.cached_tokens;
  };
  // Shorter than a page (the prefix cache has none of it): all but its last token.
  EXPECT_EQ(load_common(std::vector<int32_t>(p_.begin(), p_.begin() + 50)), 49);
  std::vector<int32_t> diverging(p_.begin(), p_.begin() + 90);
  diverging[80] = diverging[80] == 1 ? 2 : 1;
  EXPECT_EQ(load_common(diverging), 80);  // the prefix cache alone would give 64
  expect_still_serves();
}

// The model identity hashes the weights, not the path: the same file under
// another name loads the snapshot.
TEST_F(SessionRefusal, SameWeightsUnderAnotherPathLoad) {
  const std::string link = temp_path("same-model.gguf");
  fs::remove(link);
  fs::create_symlink(tkv::testing::smollm2_path(), link);
  EngineConfig cfg = config_for("turbo");
  cfg.model_path = link;
  auto other = make_engine(cfg);
  ASSERT_TRUE(other);
  const std::vector<int32_t> saved = inspect_snapshot(path_).value().tokens;  // 103
  Request r = greedy(saved, 6);
  r.load_session = path_;
  auto got = run(*other, r);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got.value().timings.cached_tokens, 102);  // all but the prompt's last token
  expect_same(got.value(), run(*eng_, greedy(saved, 6)).value());
  fs::remove(link);
}

TEST_F(SessionRefusal, MissingFile) {
  Request r = greedy(p_, 2);
  r.load_session = temp_path("does_not_exist.tkv");
  auto h = eng_->submit(r);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("cannot open"), std::string::npos);
}

TEST_F(SessionRefusal, InspectShowsTheHeader) {
  auto i = inspect_snapshot(path_);
  ASSERT_TRUE(i.ok()) << i.status().message();
  EXPECT_EQ(i.value().scheme, "turbo:k8v3");
  EXPECT_EQ(i.value().kind, "turbo");
  EXPECT_EQ(i.value().k_bits, 8);
  EXPECT_EQ(i.value().v_bits, 3);
  EXPECT_EQ(i.value().n_layers, eng_->model_info().n_layers);
  EXPECT_EQ(i.value().n_kv_heads, eng_->model_info().n_kv_heads);
  EXPECT_EQ(i.value().n_tokens, 103);
  EXPECT_EQ(i.value().file_bytes, good_.size());
}

TEST_F(SessionRefusal, SaveToAnUnwritablePathReportsInTheFinalEvent) {
  Request r = greedy(p_, 2);
  r.save_session = "/nonexistent-dir/x.tkv";
  auto f = run(*eng_, r);
  ASSERT_TRUE(f.ok());
  EXPECT_NE(f.value().session_error.find("cannot create"), std::string::npos);
}

}  // namespace
}  // namespace turbokv
