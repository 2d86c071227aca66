// Scheduler implementation (see scheduler.h).
#include "runtime/scheduler.h"

#include <algorithm>

#include "base/check.h"

namespace tkv::runtime {

int64_t Scheduler::pages_for(int64_t n_tokens) const {
  return (n_tokens + c_.page_size - 1) / c_.page_size;
}

void Scheduler::add(SeqId id, int priority, int64_t n_tokens, ChunkRule rule) {
  TKV_CHECK(n_tokens >= 1 && !contains(id) && rule.split_at >= 0 && rule.max_after >= 0);
  Entry e;
  e.priority = priority;
  e.rule = rule;
  e.arrival = next_arrival_++;
  e.n_tokens = n_tokens;
  seqs_.emplace(id, e);
}

int64_t Scheduler::chunk_len(const Entry& e, int64_t n) {
  if (e.n_computed < e.rule.split_at) return std::min(n, e.rule.split_at - e.n_computed);
  return e.rule.max_after > 0 ? std::min(n, e.rule.max_after) : n;
}

void Scheduler::cancel(SeqId id) {
  if (auto it = seqs_.find(id); it != seqs_.end()) it->second.cancelled = true;
}

int Scheduler::n_running() const {
  int n = 0;
  for (const auto& [id, e] : seqs_) n += e.running ? 1 : 0;
  return n;
}

int Scheduler::n_waiting() const {
  return static_cast<int>(seqs_.size()) - n_running();
}

int64_t Scheduler::n_computed(SeqId id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? 0 : it->second.n_computed;
}

int64_t Scheduler::outstanding(const Entry& e) const {
  const int64_t target = std::min(e.n_tokens + 1, c_.max_seq_tokens);
  return std::max<int64_t>(0, pages_for(target) - e.pages);
}

// Running (seniority: priority desc, admission asc) or waiting (priority desc,
// arrival asc) sequences, in the order they are served.
std::vector<SeqId> Scheduler::ordered(bool running) const {
  std::vector<SeqId> ids;
  for (const auto& [id, e] : seqs_)
    if (e.running == running) ids.push_back(id);
  std::sort(ids.begin(), ids.end(), [&](SeqId a, SeqId b) {
    const Entry& x = seqs_.at(a);
    const Entry& y = seqs_.at(b);
    if (x.priority != y.priority) return x.priority > y.priority;
    return running ? x.admitted < y.admitted : x.arrival < y.arrival;
  });
  return ids;
}

void Scheduler::preempt(SeqId id, Entry& e, StepPlan& p) {
  used_ -= e.pages;
  e.pages = 0;
  e.n_computed = 0;
  e.running = false;
  ++n_preemptions_;
  p.preempted.push_back(id);
}

void Scheduler::plan_running(StepPlan& p, int64_t& budget) {
  std::vector<SeqId> order = ordered(true);
  std::vector<PlannedChunk> prefill;
  for (size_t i = 0; i < order.size(); ++i) {
    Entry& e = seqs_.at(order[i]);
    if (!e.running) continue;  // preempted for a more senior one
    const int64_t pending = e.n_tokens - e.n_computed;
    TKV_CHECK(pending >= 1);
    const int64_t n = pending == 1 ? 1 : chunk_len(e, std::min(pending, budget));
    if (n <= 0) continue;
    const int64_t need = pages_for(e.n_computed + n) - e.pages;
    // Make room by preempting the most junior running sequences, this one last.
    for (size_t j = order.size(); need > free_pages() && j-- > i;) {
      Entry& v = seqs_.at(order[j]);
      if (v.running) preempt(order[j], v, p);
    }
    if (!e.running) break;  // it was the most junior left: nothing after it runs either
    e.pages += need;
    used_ += need;
    const PlannedChunk c{order[i], e.n_computed, n, n == pending};
    if (pending == 1) {
      p.chunks.push_back(c);
    } else {
      prefill.push_back(c);
      budget -= n;
    }
  }
  p.chunks.insert(p.chunks.end(), prefill.begin(), prefill.end());
}

void Scheduler::plan_drafts(StepPlan& p, int64_t budget) {
  for (PlannedChunk& c : p.chunks) {
    Entry& e = seqs_.at(c.id);
    if (c.n != 1 || !c.completes || e.n_draft == 0) continue;  // not a decode, or no offer
    // The decode token is booked: drafts follow it at n_computed + 1.
    const int64_t fit_pages = (e.pages + free_pages()) * c_.page_size - e.n_computed - 1;
    const int64_t d = std::max<int64_t>(
        0, std::min({e.n_draft, budget, c_.max_seq_tokens - e.n_computed - 1, fit_pages}));
    const int64_t need = pages_for(e.n_computed + 1 + d) - e.pages;
    if (need > 0) {
      e.pages += need;
      used_ += need;
    }
    c.n += d;
    c.n_draft = d;
    budget -= d;
  }
}

void Scheduler::plan_admissions(StepPlan& p, int64_t& budget,
                                const std::function<int64_t(SeqId)>& admit) {
  int running = n_running();
  for (SeqId id : ordered(false)) {
    if (running >= c_.max_running || budget <= 0) return;
    Entry& e = seqs_.at(id);
    int64_t still_needed = 0;  // what admitted sequences may still book
    for (const auto& [rid, r] : seqs_)
      if (r.running) still_needed += outstanding(r);
    // Head-of-line: if the first in line does not fit, nobody behind it jumps ahead.
    if (free_pages() - still_needed < outstanding(e)) return;
    const int64_t reused = admit ? admit(id) : 0;
    if (reused < 0) return;
    e.running = true;
    e.admitted = next_admit_++;
    e.n_computed = std::min(reused, e.n_tokens - 1);  // the last known token is always run
    const int64_t n = chunk_len(e, std::min(e.n_tokens - e.n_computed, budget));
    e.pages = pages_for(e.n_computed + n);
    used_ += e.pages;
    p.admitted.push_back(id);
    p.chunks.push_back({id, e.n_computed, n, e.n_computed + n == e.n_tokens});
    budget -= n;
    ++running;
  }
}

StepPlan Scheduler::plan(const std::function<int64_t(SeqId)>& admit) {
  StepPlan p;
  for (auto it = seqs_.begin(); it != seqs_.end();) {
    if (!it->second.cancelled) {
      ++it;
      continue;
    }
    used_ -= it->second.pages;
    p.dropped.push_back(it->first);
    it = seqs_.erase(it);
  }
  int64_t budget = c_.step_tokens;
  for (const auto& [id, e] : seqs_)
    if (e.running && e.n_tokens - e.n_computed == 1) --budget;  // decodes go first
  plan_running(p, budget);
  // A step that had to preempt admits nobody: the pool is short, and the victim
  // would otherwise be re-admitted at once and thrash.
  if (p.preempted.empty()) {
    plan_admissions(p, budget, admit);
    plan_drafts(p, budget);  // last: only leftover budget and pages, and it never preempts
  }
  for (auto& [id, e] : seqs_) e.n_draft = 0;  // an offer holds for one plan
  return p;
}

void Scheduler::done(const StepPlan& p) {
  for (const PlannedChunk& c : p.chunks) {
    auto it = seqs_.find(c.id);
    if (it == seqs_.end()) continue;
    TKV_CHECK(it->second.n_computed == c.first);
    it->second.n_computed += c.n;
  }
}

void Scheduler::append(SeqId id) {
  ++seqs_.at(id).n_tokens;
}

void Scheduler::set_draft(SeqId id, int64_t n) {
  TKV_CHECK(n >= 0);
  seqs_.at(id).n_draft = n;
}

void Scheduler::rollback(SeqId id, int64_t n) {
  Entry& e = seqs_.at(id);
  TKV_CHECK(n >= 0 && n <= e.n_computed);
  e.n_computed -= n;
  const int64_t keep = pages_for(e.n_computed);
  used_ -= e.pages - keep;
  e.pages = keep;
}

void Scheduler::finish(SeqId id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  used_ -= it->second.pages;
  seqs_.erase(it);
}

}  // namespace tkv::runtime
