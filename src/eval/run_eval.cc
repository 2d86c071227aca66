// The evaluation driver (eval.h): makes or reuses the bf16 base file, then runs
// every scheme through the protocol and scores it against the base, with a
// progress bar and ETA on stderr.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/timer.h"
#include "eval/base_logits.h"
#include "eval/eval.h"
#include "eval/protocols.h"

namespace tkv::eval {
namespace {

// One line on stderr, redrawn at most every 0.5 s: scheme i/n, bar, ETAs.
class Progress {
 public:
  Progress(bool on, int n_runs, int64_t work_per_run)
      : on_(on), n_runs_(n_runs), work_(work_per_run) {}
  void start(int run, const std::string& scheme) {
    run_ = run;
    scheme_ = scheme;
    run_timer_.reset();
  }
  void update(int64_t done, int64_t total) {
    if (!on_ || (done < total && last_.elapsed_ms() < 500)) return;
    last_.reset();
    const double frac = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
    const double run_s = run_timer_.elapsed_ms() / 1000.0;
    const double all_done = static_cast<double>(run_) + frac;
    const double eta_run = frac > 0 ? run_s * (1 - frac) / frac : 0;
    const double eta_all =
        all_done > 0 ? all_timer_.elapsed_ms() / 1000.0 * (n_runs_ - all_done) / all_done : 0;
    const int filled = static_cast<int>(30 * frac);
    std::fprintf(stderr, "\r[eval] %d/%d %-12s [%.*s%*s] %3.0f%% | ETA %s, all %s   ", run_ + 1,
                 n_runs_, scheme_.c_str(), filled, "==============================", 30 - filled,
                 "", 100 * frac, fmt_s(eta_run).c_str(), fmt_s(eta_all).c_str());
    if (done >= total) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }

 private:
  static std::string fmt_s(double s) {
    char b[32];
    std::snprintf(b, sizeof b, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
    return b;
  }
  bool on_;
  int n_runs_, run_ = 0;
  int64_t work_;
  std::string scheme_;
  Timer run_timer_, all_timer_, last_;
};

Result<std::string> read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return make_error(StatusCode::kNotFound, "[eval] cannot read corpus {}", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Everything the base distributions depend on, so a stale file is never reused:
// the model and corpus by content hash, then every setting.
std::string base_key(const EvalOptions& o, uint64_t model_hash, uint64_t corpus_hash,
                     int64_t n_corpus) {
  std::string k = fmt::format("model=xxh3:{:016x} corpus=xxh3:{:016x}:{} protocol={}", model_hash,
                              corpus_hash, n_corpus, protocol_name(o.protocol));
  k += fmt::format(" trunc={}/{}/{} key_center={}", o.trunc.mass, o.trunc.k_min, o.trunc.k_max,
                   o.engine.key_center ? "on" : "off");
  if (o.protocol == Protocol::kWikitext)
    return k + fmt::format(" n_ctx={} n_chunks={}", o.n_ctx, o.n_chunks);
  return k + fmt::format(" prompts={} prefix={} steps={}", o.n_prompts, o.prefix_tokens,
                         o.decode_steps);
}

// True when a valid base for `key` with n_pos positions exists. A file that is there
// but unusable (corrupt, another key) is reported and then recomputed, never trusted.
bool usable_base(const EvalOptions& o, const std::string& key, int nv, int64_t n_pos) {
  auto existing = BaseLogitsReader::open(o.base_path, key, nv);
  if (!existing.ok()) {
    if (existing.status().code() != StatusCode::kNotFound)
      std::fprintf(stderr, "warning: %s; recomputing it\n", existing.status().message().c_str());
    return false;
  }
  if (existing.value()->n_positions() != n_pos) {
    std::fprintf(stderr,
                 "warning: [eval] %s holds %lld positions, this evaluation %lld; recomputing it\n",
                 o.base_path.c_str(), static_cast<long long>(existing.value()->n_positions()),
                 static_cast<long long>(n_pos));
    return false;
  }
  return true;
}

void fill_bits(const turbokv::Engine& eng, SchemeResult* r) {
  const turbokv::ModelInfo& m = eng.model_info();
  const turbokv::KvInfo kv = eng.kv_info();
  const double elems = 2.0 * m.n_layers * m.n_kv_heads * m.head_dim;
  r->bits_per_elem = 8.0 * static_cast<double>(kv.bytes_per_token) / elems;
  r->format_bits = kv.format_bits_per_elem;
}

// The bf16 row is the base pass itself, or a bf16 re-run scored against it.
bool is_bf16(const std::string& scheme) {
  auto kv = turbokv::KvConfig::parse(scheme);
  return kv.ok() && kv.value().kind == turbokv::KvConfig::Kind::kBf16;
}

void fill_scores(const ScoreAccumulator& acc, SchemeResult* r) {
  r->kl = acc.kl.mean();
  r->kl_ci95 = acc.kl.ci95();
  r->ppl = acc.ppl();
  r->ppl_ci95 = acc.ppl_ci95();
  r->top1 = acc.top1.mean();
  r->top1_ci95 = acc.top1.ci95();
  r->kept_mass = acc.kept_mass.mean();
  r->n_scored = acc.kl.count();
}

Status run_protocol(turbokv::Engine& eng, const std::vector<int32_t>& corpus, const EvalOptions& o,
                    const PositionFn& on_pos, const WorkFn& on_work) {
  if (o.protocol == Protocol::kWikitext) return run_wikitext(eng, corpus, o, on_pos, on_work);
  return run_serving_kl(eng, corpus, o, on_pos, on_work);
}

// bf16 pass that writes the base file; its own scores (KL 0 by construction) are the bf16 row.
Result<SchemeResult> make_base(turbokv::Engine& eng, const std::vector<int32_t>& corpus,
                               const EvalOptions& o, const std::string& key, Progress& prog) {
  const int nv = eng.model_info().n_vocab;
  TKV_ASSIGN_OR_RETURN(auto w, BaseLogitsWriter::create(o.base_path, key, nv, o.trunc));
  ScoreAccumulator acc;
  std::vector<uint8_t> scratch;
  Timer t;
  auto on_pos = [&](const float* logits, int32_t target) -> Status {
    const TruncatedDist d = truncate_dist(logits, nv, target, o.trunc);
    acc.add(score_position(d, logits, nv, &scratch));
    return w->append(d);
  };
  TKV_RETURN_IF_ERROR(
      run_protocol(eng, corpus, o, on_pos, [&](int64_t a, int64_t b) { prog.update(a, b); }));
  TKV_RETURN_IF_ERROR(w->finish());
  SchemeResult r;
  r.scheme = "bf16";
  fill_bits(eng, &r);
  fill_scores(acc, &r);
  r.seconds = t.elapsed_ms() / 1000.0;
  return r;
}

Result<SchemeResult> score_scheme(turbokv::Engine& eng, const std::string& scheme,
                                  const std::vector<int32_t>& corpus, const EvalOptions& o,
                                  const std::string& key, Progress& prog) {
  const int nv = eng.model_info().n_vocab;
  TKV_ASSIGN_OR_RETURN(auto rd, BaseLogitsReader::open(o.base_path, key, nv));
  ScoreAccumulator acc;
  std::vector<uint8_t> scratch;
  TruncatedDist d;
  Timer t;
  auto on_pos = [&](const float* logits, int32_t target) -> Status {
    TKV_RETURN_IF_ERROR(rd->next(&d));
    if (d.target != target)
      return data_loss("[eval] base logits out of step: target {} vs {}", d.target, target);
    acc.add(score_position(d, logits, nv, &scratch));
    return Status();
  };
  TKV_RETURN_IF_ERROR(
      run_protocol(eng, corpus, o, on_pos, [&](int64_t a, int64_t b) { prog.update(a, b); }));
  if (acc.kl.count() != rd->n_positions())
    return data_loss("[eval] scored {} positions, base has {}", acc.kl.count(), rd->n_positions());
  SchemeResult r;
  r.scheme = scheme;
  fill_bits(eng, &r);
  fill_scores(acc, &r);
  r.seconds = t.elapsed_ms() / 1000.0;
  return r;
}

}  // namespace

Result<std::unique_ptr<turbokv::Engine>> make_engine(const EngineFactory& factory,
                                                     turbokv::EngineConfig base,
                                                     const std::string& scheme) {
  auto kv = turbokv::KvConfig::parse(scheme);
  if (!kv.ok()) return invalid_argument("[eval] scheme: {}", kv.status().message());
  base.kv = kv.value();
  // Every position is computed by this engine: a cached prefix from an earlier
  // pass would hand over K/V computed in other chunks.
  base.prefix_cache = false;
  return factory ? factory(base) : turbokv::Engine::create(base);
}

Result<Protocol> parse_protocol(const std::string& text) {
  if (text == "serving-kl") return Protocol::kServingKl;
  if (text == "wikitext") return Protocol::kWikitext;
  return invalid_argument("[eval] unknown protocol '{}' (valid: serving-kl, wikitext)", text);
}

const char* protocol_name(Protocol p) {
  return p == Protocol::kWikitext ? "wikitext" : "serving-kl";
}

Result<EvalReport> run_eval(const EvalOptions& opts, const EngineFactory& factory) {
  if (opts.schemes.empty()) return invalid_argument("[eval] no schemes given");
  if (opts.base_path.empty()) return invalid_argument("[eval] no base-logits path given");
  for (const std::string& s : opts.schemes)  // all refused before any model is loaded
    if (auto kv = turbokv::KvConfig::parse(s); !kv.ok())
      return invalid_argument("[eval] scheme: {}", kv.status().message());
  TKV_ASSIGN_OR_RETURN(std::unique_ptr<turbokv::Engine> base_eng,
                       make_engine(factory, opts.engine, "bf16"));
  TKV_ASSIGN_OR_RETURN(const std::string text, read_text(opts.data_path));
  const std::vector<int32_t> corpus = corpus_tokens(base_eng->tokenizer(), text);
  EvalReport rep;
  rep.opts = opts;
  rep.model_path = opts.engine.model_path;
  rep.arch = base_eng->model_info().arch;
  rep.head_dim = base_eng->model_info().head_dim;
  rep.n_tokens_corpus = static_cast<int64_t>(corpus.size());
  TKV_ASSIGN_OR_RETURN(const int64_t n_pos, planned_positions(opts, rep.n_tokens_corpus));
  TKV_ASSIGN_OR_RETURN(const uint64_t model_hash, hash_file(opts.engine.model_path));
  const std::string key = base_key(opts, model_hash, hash_bytes(text), rep.n_tokens_corpus);
  const int nv = base_eng->model_info().n_vocab;
  const bool need_base = !usable_base(opts, key, nv, n_pos);
  Progress prog(opts.progress, static_cast<int>(opts.schemes.size()) + (need_base ? 1 : 0),
                planned_work(opts));
  int run = 0;
  SchemeResult base_row;
  if (need_base) {
    if (opts.progress)
      std::fprintf(stderr, "[eval] writing bf16 base logits to %s\n", opts.base_path.c_str());
    prog.start(run++, "bf16 (base)");
    TKV_ASSIGN_OR_RETURN(base_row, make_base(*base_eng, corpus, opts, key, prog));
  }
  for (const std::string& scheme : opts.schemes) {
    if (is_bf16(scheme) && need_base) {  // the base pass is the bf16 row
      rep.rows.push_back(base_row);
      continue;
    }
    prog.start(run++, scheme);
    std::unique_ptr<turbokv::Engine> eng = is_bf16(scheme) ? std::move(base_eng) : nullptr;
    base_eng.reset();  // one model in memory at a time
    if (!eng) {
      TKV_ASSIGN_OR_RETURN(eng, make_engine(factory, opts.engine, scheme));
    }
    TKV_ASSIGN_OR_RETURN(SchemeResult r, score_scheme(*eng, scheme, corpus, opts, key, prog));
    rep.rows.push_back(r);
  }
  return rep;
}

}  // namespace tkv::eval
