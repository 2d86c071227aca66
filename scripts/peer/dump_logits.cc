// Peer reference dump: runs llama.cpp (through llama.h only) on the first n_pos tokens of a
// text file, tokenized as llama-perplexity does (whole file, add_special=true), in ONE sequence
// and ONE batch, and writes per position the logsumexp of the logits and the top-k logits.
// Output format: tests/fixtures/logits/README.md. Built and run by
// scripts/peer/make-logits-fixtures.
//   dump_logits MODEL TEXT OUT [--n-pos 512] [--k 64] [--threads 2] [--flash-attn auto|on|off]
#include <llama.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <numeric>
#include <string>
#include <vector>

namespace {

constexpr char kMagic[4] = {'T', 'K', 'L', 'G'};
constexpr uint32_t kVersion = 1;

struct Options {
  std::string model_path;
  std::string text_path;
  std::string out_path;
  int n_pos = 512;
  int k = 64;
  int n_threads = 2;
  llama_flash_attn_type flash_attn = LLAMA_FLASH_ATTN_TYPE_AUTO;
};

[[noreturn]] void fail(const std::string& msg) {
  std::fprintf(stderr, "[dump_logits] %s\n", msg.c_str());
  std::exit(1);
}

Options parse_args(int argc, char** argv) {
  Options opt;
  std::vector<std::string> pos;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) fail("missing value after " + a);
      return argv[++i];
    };
    if (a == "--n-pos") {
      opt.n_pos = std::atoi(next().c_str());
    } else if (a == "--k") {
      opt.k = std::atoi(next().c_str());
    } else if (a == "--threads") {
      opt.n_threads = std::atoi(next().c_str());
    } else if (a == "--flash-attn") {
      const std::string v = next();
      if (v == "auto")
        opt.flash_attn = LLAMA_FLASH_ATTN_TYPE_AUTO;
      else if (v == "on")
        opt.flash_attn = LLAMA_FLASH_ATTN_TYPE_ENABLED;
      else if (v == "off")
        opt.flash_attn = LLAMA_FLASH_ATTN_TYPE_DISABLED;
      else
        fail("--flash-attn takes auto|on|off, got " + v);
    } else {
      pos.push_back(a);
    }
  }
  if (pos.size() != 3) fail("usage: dump_logits MODEL TEXT OUT [--n-pos N] [--k K] [--threads T]");
  if (opt.n_pos <= 0 || opt.k <= 0 || opt.n_threads <= 0) fail("n-pos, k, threads must be > 0");
  opt.model_path = pos[0];
  opt.text_path = pos[1];
  opt.out_path = pos[2];
  return opt;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open " + path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Same call as common_tokenize(ctx, text, add_special=true, parse_special=false) in
// llama-perplexity.
std::vector<llama_token> tokenize(const llama_vocab* vocab, const std::string& text) {
  std::vector<llama_token> toks(text.size() + 2);
  int32_t n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), toks.data(),
                             static_cast<int32_t>(toks.size()), true, false);
  if (n < 0) {
    toks.resize(static_cast<size_t>(-n));
    n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), toks.data(),
                       static_cast<int32_t>(toks.size()), true, false);
  }
  if (n < 0) fail("tokenization failed");
  toks.resize(static_cast<size_t>(n));
  return toks;
}

// Evaluates tokens [0, n) at positions 0..n-1 of sequence 0 with logits for every position.
// Returns row-major logits.  // [n_pos, n_vocab]
std::vector<float> eval_all(llama_context* ctx, const std::vector<llama_token>& toks, int n_vocab) {
  const int n = static_cast<int>(toks.size());
  llama_batch batch = llama_batch_init(n, 0, 1);
  for (int i = 0; i < n; ++i) {
    batch.token[i] = toks[static_cast<size_t>(i)];
    batch.pos[i] = i;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  batch.n_tokens = n;
  const int32_t rc = llama_decode(ctx, batch);
  if (rc != 0) fail("llama_decode returned " + std::to_string(rc));
  std::vector<float> logits(static_cast<size_t>(n) * static_cast<size_t>(n_vocab));
  for (int i = 0; i < n; ++i) {
    const float* row = llama_get_logits_ith(ctx, i);
    if (row == nullptr) fail("no logits for position " + std::to_string(i));
    std::memcpy(&logits[static_cast<size_t>(i) * static_cast<size_t>(n_vocab)], row,
                sizeof(float) * static_cast<size_t>(n_vocab));
  }
  llama_batch_free(batch);
  return logits;
}

template <typename T>
void put(std::ofstream& out, const T& v) {
  out.write(reinterpret_cast<const char*>(&v), sizeof(T));
}

// Writes one position: lse (fp64 accumulation, stored fp32), then top-k (id, logit)
// sorted by logit descending, ties by ascending id.
void write_position(std::ofstream& out, const float* row, int n_vocab, int k,  // row: [n_vocab]
                    std::vector<int32_t>& order) {
  float max_logit = -INFINITY;
  for (int v = 0; v < n_vocab; ++v) {
    if (!std::isfinite(row[v])) fail("non-finite logit at vocab id " + std::to_string(v));
    max_logit = std::max(max_logit, row[v]);
  }
  double sum = 0.0;
  for (int v = 0; v < n_vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - max_logit);
  put(out, static_cast<float>(max_logit + std::log(sum)));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [row](int32_t a, int32_t b) {
    return row[a] > row[b] || (row[a] == row[b] && a < b);
  });
  for (int j = 0; j < k; ++j) {
    put(out, order[static_cast<size_t>(j)]);
    put(out, row[order[static_cast<size_t>(j)]]);
  }
}

void write_fixture(const Options& opt, const std::vector<llama_token>& toks,
                   const std::vector<float>& logits, int n_vocab) {  // logits: [n_pos, n_vocab]
  std::ofstream out(opt.out_path, std::ios::binary);
  if (!out) fail("cannot write " + opt.out_path);
  out.write(kMagic, sizeof(kMagic));
  put(out, kVersion);
  put(out, static_cast<uint32_t>(opt.n_pos));
  put(out, static_cast<uint32_t>(opt.k));
  put(out, static_cast<uint32_t>(n_vocab));
  for (llama_token t : toks) put(out, static_cast<int32_t>(t));
  std::vector<int32_t> order(static_cast<size_t>(n_vocab));
  for (int i = 0; i < opt.n_pos; ++i) {
    write_position(out, &logits[static_cast<size_t>(i) * static_cast<size_t>(n_vocab)], n_vocab,
                   opt.k, order);
  }
  // Trailing section: logit of the actual next token ids[i+1] (0 for the last position), so
  // readers can compute exact NLL/perplexity even when that token is outside the top-k.
  for (int i = 0; i < opt.n_pos; ++i) {
    const size_t row = static_cast<size_t>(i) * static_cast<size_t>(n_vocab);
    put(out, i + 1 < opt.n_pos ? logits[row + static_cast<size_t>(toks[static_cast<size_t>(i) + 1])]
                               : 0.0f);
  }
  if (!out) fail("write failed: " + opt.out_path);
}

std::string
    g_flash_attn_line;  // llama.cpp's "Flash Attention enabled|... disabled" auto resolution

void quiet_log(ggml_log_level level, const char* text, void*) {
  if (level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_WARN) std::fputs(text, stderr);
  const std::string t = text;
  if (t.find("Flash Attention") != std::string::npos) {
    g_flash_attn_line = t.substr(0, t.find_last_not_of("\n ") + 1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse_args(argc, argv);
  if (std::getenv("DUMP_LOGITS_VERBOSE") == nullptr) llama_log_set(quiet_log, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(opt.model_path.c_str(), mp);
  if (model == nullptr) fail("cannot load model " + opt.model_path);
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int n_vocab = llama_vocab_n_tokens(vocab);
  if (opt.k > n_vocab) fail("k > n_vocab");

  std::vector<llama_token> toks = tokenize(vocab, read_file(opt.text_path));
  const size_t n_total = toks.size();
  if (n_total < static_cast<size_t>(opt.n_pos)) fail("text has fewer tokens than n-pos");
  toks.resize(static_cast<size_t>(opt.n_pos));

  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = static_cast<uint32_t>(opt.n_pos);
  cp.n_batch = static_cast<uint32_t>(opt.n_pos);
  cp.n_ubatch = static_cast<uint32_t>(opt.n_pos);
  cp.n_seq_max = 1;
  cp.n_threads = opt.n_threads;
  cp.n_threads_batch = opt.n_threads;
  cp.flash_attn_type = opt.flash_attn;
  cp.type_k = GGML_TYPE_F16;
  cp.type_v = GGML_TYPE_F16;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (ctx == nullptr) fail("cannot create context");

  const std::vector<float> logits = eval_all(ctx, toks, n_vocab);
  write_fixture(opt, toks, logits, n_vocab);

  char desc[256];
  llama_model_desc(model, desc, sizeof(desc));
  // One JSON line of metadata on stdout for the sidecar file.
  std::printf(
      "{\"model_desc\": \"%s\", \"n_vocab\": %d, \"n_pos\": %d, \"k\": %d, \"n_tokens_file\": %zu, "
      "\"add_bos\": %s, \"bos_id\": %d, \"first_token\": %d, \"n_threads\": %d, "
      "\"flash_attn\": \"%s\", \"flash_attn_log\": \"%s\", \"type_k\": \"f16\", \"type_v\": "
      "\"f16\"}\n",
      desc, n_vocab, opt.n_pos, opt.k, n_total, llama_vocab_get_add_bos(vocab) ? "true" : "false",
      llama_vocab_bos(vocab), toks[0], opt.n_threads, llama_flash_attn_type_name(opt.flash_attn),
      g_flash_attn_line.c_str());
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
