// bench --spec ngram: decode tok/s of one greedy request without and with
// speculation on a code-edit prompt (a module of similar functions, then the
// start of its rewrite, so the output can copy from the prompt), with the
// acceptance rate and the tokens each decode step gave. Median of --reps runs
// after a warm-up; the largest -n is the length generated.
#include <algorithm>

#include "tools/turbokv/bench.h"

namespace tkv::cli::bench {
namespace {

std::string code_edit_prompt() {
  static const char* kOps[] = {"w * h",     "w + h",     "2 * (w + h)", "w * h / 2",
                               "max(w, h)", "min(w, h)", "w - h",       "abs(w - h)"};
  std::string text = "# geometry.py\n\n";
  for (int i = 0; i < 8; ++i)
    text += fmt::format(
        "def shape_{}(w, h):\n    \"\"\"Shape {} of a w x h box.\"\"\"\n    return {}\n\n", i, i,
        kOps[i]);
  return text +
         "# The same module rewritten with type hints:\n\ndef shape_0(w: float, h: float) -> "
         "float:\n";
}

}  // namespace

Status run_spec(const BenchArgs& a, const std::string& scheme, Results& out) {
  const int64_t n_gen = *std::max_element(a.n_gen.begin(), a.n_gen.end());
  TKV_ASSIGN_OR_RETURN(auto probe, open_engine(a.common, scheme, 1, a.common.ctx));
  const std::vector<int32_t> prompt = probe->tokenizer().encode(code_edit_prompt(), true, false);
  probe.reset();
  const auto need = static_cast<int64_t>(prompt.size()) + n_gen + 1;
  TKV_ASSIGN_OR_RETURN(auto eng,
                       open_engine(a.common, scheme, 1, std::max<int64_t>(a.common.ctx, need)));
  out.model = eng->model_info().name;
  SpecRow row;
  row.scheme = scheme;
  row.n_prompt = static_cast<int64_t>(prompt.size());
  row.n_gen = n_gen;
  for (int spec = 0; spec < 2; ++spec) {
    std::vector<double> tok_s;
    int64_t drafted = 0, accepted = 0, decoded = 0;
    for (int r = 0; r <= a.reps; ++r) {
      turbokv::Request q = fixed_request(prompt, n_gen);
      if (spec) q.spec = a.spec;
      TKV_ASSIGN_OR_RETURN(const Ran ran, run_request(*eng, q));
      if (r == 0) continue;  // warm-up
      const turbokv::Timings& t = ran.end.timings;
      tok_s.push_back(t.decode_tok_s());
      drafted += t.drafted_tokens;
      accepted += t.accepted_tokens;
      decoded += t.decode_tokens;
    }
    (spec ? row.spec_tok_s : row.plain_tok_s) = median(tok_s);
    if (spec) {
      row.accept_rate = drafted > 0 ? static_cast<double>(accepted) / drafted : 0;
      // Each decode step gives one token plus the drafts it kept.
      row.tokens_per_step =
          decoded > accepted ? static_cast<double>(decoded) / (decoded - accepted) : 0;
    }
  }
  out.spec.push_back(row);
  return Status();
}

}  // namespace tkv::cli::bench
