// Passkey retrieval (needle.h). Filler and question follow the Landmark Attention
// passkey prompt; the key is placed at a filler-sentence boundary nearest the depth.
#include "eval/needle.h"

#include <cstdio>
#include <map>
#include <random>

#include "base/timer.h"

namespace tkv::eval {
namespace {
constexpr const char* kIntro =
    "There is an important info hidden inside a lot of irrelevant text. Find it and memorize it. "
    "I will quiz you about the important info there.";
constexpr const char* kFiller =
    " The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
constexpr const char* kQuestion = "\n\nWhat is the pass key? The pass key is";

void append(std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
}

// First run of digits in s, or -1.
int first_number(const std::string& s) {
  size_t i = s.find_first_of("0123456789");
  if (i == std::string::npos) return -1;
  size_t j = s.find_first_not_of("0123456789", i);
  const std::string d =
      s.substr(i, std::min<size_t>(j == std::string::npos ? s.size() - i : j - i, 9));
  return std::stoi(d);
}

// Greedy answer to one prompt: up to max_new_tokens, ending at an end-of-generation token.
Result<NeedleTrial> one_trial(turbokv::Engine& eng, const std::vector<int32_t>& prompt,
                              const NeedleOptions& o) {
  turbokv::Request r;
  r.prompt_tokens = prompt;
  r.sampling.temperature = 0;
  r.sampling.repeat_penalty = 1;
  r.max_tokens = o.max_new_tokens;
  TKV_ASSIGN_OR_RETURN(const turbokv::Completion c, eng.generate(r));
  if (c.finish == turbokv::FinishReason::kError)
    return make_error(StatusCode::kInternal, "[eval] needle prompt of {} tokens: {}", prompt.size(),
                      c.error);
  NeedleTrial t;
  for (int32_t tok : c.tokens) t.answer += eng.tokenizer().token_to_piece(tok);
  t.length = static_cast<int64_t>(prompt.size());
  return t;
}
}  // namespace

int needle_passkey(uint32_t seed, int64_t length, double depth, int trial) {
  std::seed_seq ss{seed, static_cast<uint32_t>(length), static_cast<uint32_t>(depth * 1000),
                   static_cast<uint32_t>(trial)};
  std::mt19937 rng(ss);
  return std::uniform_int_distribution<int>(10000, 99999)(rng);
}

std::vector<int32_t> needle_prompt(const turbokv::Tokenizer& tok, int64_t length, double depth,
                                   int passkey) {
  std::vector<int32_t> out;
  if (tok.add_bos() && tok.bos_id() >= 0) out.push_back(tok.bos_id());
  append(out, tok.encode(kIntro, false, false));
  const std::string key = std::to_string(passkey);
  const auto needle = tok.encode(
      " The pass key is " + key + ". Remember it. " + key + " is the pass key.", false, false);
  const auto filler = tok.encode(kFiller, false, false);
  const auto question = tok.encode(kQuestion, false, false);
  const int64_t room = length - static_cast<int64_t>(out.size() + needle.size() + question.size());
  const int64_t n_rep = std::max<int64_t>(1, room / static_cast<int64_t>(filler.size()));
  const int64_t at = static_cast<int64_t>(depth * static_cast<double>(n_rep) + 0.5);
  for (int64_t r = 0; r <= n_rep; ++r) {
    if (r == at) append(out, needle);
    if (r < n_rep) append(out, filler);
  }
  append(out, question);
  return out;
}

Result<std::vector<NeedleTrial>> run_needle(const NeedleOptions& o, const EngineFactory& factory) {
  std::vector<NeedleTrial> all;
  const size_t per_scheme = o.lengths.size() * o.depths.size() * static_cast<size_t>(o.trials);
  Timer timer;
  size_t done = 0;
  for (const std::string& scheme : o.schemes) {
    TKV_ASSIGN_OR_RETURN(auto eng, make_engine(factory, o.engine, scheme));
    for (int64_t len : o.lengths)
      for (double depth : o.depths)
        for (int trial = 0; trial < o.trials; ++trial) {
          const int key = needle_passkey(o.seed, len, depth, trial);
          const auto prompt = needle_prompt(eng->tokenizer(), len, depth, key);
          TKV_ASSIGN_OR_RETURN(NeedleTrial t, one_trial(*eng, prompt, o));
          t.scheme = scheme;
          t.depth = depth;
          t.trial = trial;
          t.passkey = key;
          t.correct = first_number(t.answer) == key;
          all.push_back(t);
          ++done;
          if (o.progress) {
            const double s = timer.elapsed_ms() / 1000.0;
            const double eta = s / static_cast<double>(done) *
                               static_cast<double>(per_scheme * o.schemes.size() - done);
            std::fprintf(stderr,
                         "[needle] %zu/%zu %s len %lld depth %.2f: %s (%s) | ETA %dm%02ds\n", done,
                         per_scheme * o.schemes.size(), scheme.c_str(),
                         static_cast<long long>(t.length), depth, t.correct ? "ok" : "MISS",
                         t.answer.c_str(), static_cast<int>(eta) / 60, static_cast<int>(eta) % 60);
          }
        }
  }
  return all;
}

nlohmann::json needle_to_json(const NeedleOptions& o, const std::vector<NeedleTrial>& trials) {
  nlohmann::json tj = nlohmann::json::array();
  std::map<std::tuple<std::string, int64_t, double>, std::pair<int, int>>
      acc;  // (scheme, target len, depth) -> ok, n
  for (const NeedleTrial& t : trials) {
    tj.push_back({{"scheme", t.scheme},
                  {"length", t.length},
                  {"depth", t.depth},
                  {"trial", t.trial},
                  {"passkey", t.passkey},
                  {"answer", t.answer},
                  {"correct", t.correct}});
  }
  size_t i = 0;
  for (const std::string& s : o.schemes)
    for (int64_t len : o.lengths)
      for (double d : o.depths)
        for (int k = 0; k < o.trials && i < trials.size(); ++k, ++i) {
          auto& a = acc[{s, len, d}];
          a.first += trials[i].correct ? 1 : 0;
          a.second += 1;
        }
  nlohmann::json sj = nlohmann::json::array();
  for (const auto& [k, v] : acc)
    sj.push_back({{"scheme", std::get<0>(k)},
                  {"length", std::get<1>(k)},
                  {"depth", std::get<2>(k)},
                  {"accuracy", static_cast<double>(v.first) / v.second},
                  {"n", v.second}});
  return {{"model", o.model_label}, {"trials", tj}, {"summary", sj}};
}

}  // namespace tkv::eval
