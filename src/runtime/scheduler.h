// Scheduler: the continuous-batching policy, pure bookkeeping (no model, no
// cache), so it is unit-tested on its own. Each step it plans one ragged batch:
// every running sequence's decode token, then prefill chunks (running ones
// first, then admissions) under a token budget. It keeps a ledger of KV pages
// (a sequence holding n tokens holds ceil(n / page_size) pages) and admits a
// waiting sequence only when its whole prompt fits beside what running
// sequences still need; when decoding outgrows the pool, the most junior
// running sequence (lowest priority, admitted last) is preempted: its pages are
// freed and it is recomputed later (prompt + generated tokens re-prefilled).
// Order: higher priority first, first come first served within a priority, and
// strict head-of-line admission, so a stream of short requests cannot starve a
// long one. Speculative decoding: a decode may carry draft tokens (set_draft)
// when budget, context and free pages allow; rejected ones are rolled back.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <vector>

namespace tkv::runtime {

using SeqId = int64_t;

struct SchedulerConfig {
  int64_t total_pages = 0;        // KV pages in the pool, all sequences together
  int page_size = 64;             // tokens per page
  int max_running = 8;            // sequences holding KV state at once (cache slots)
  int64_t step_tokens = 512;      // most tokens of one step (>= max_running: decodes always fit)
  int64_t max_seq_tokens = 4096;  // context: most tokens one sequence holds in the KV
};

// How one sequence's tokens may be cut into chunks (a scoring pass, Engine::score):
// no chunk crosses split_at, and chunks from split_at on hold at most max_after
// tokens (0 = as many as the step budget allows). The default cuts only by budget.
struct ChunkRule {
  int64_t split_at = 0;
  int64_t max_after = 0;
};

// n tokens [first, first + n) of one sequence; `completes` when they reach the
// sequence's last known token (its next-token logits are then wanted). A
// speculative decode's last n_draft tokens are drafts, after the known ones.
struct PlannedChunk {
  SeqId id = 0;
  int64_t first = 0;
  int64_t n = 0;
  bool completes = false;
  int64_t n_draft = 0;
};

struct StepPlan {
  std::vector<SeqId> dropped;        // cancelled: their KV (if any) is to be freed; forgotten
  std::vector<SeqId> preempted;      // KV to be freed; back to waiting, recomputed later
  std::vector<SeqId> admitted;       // need a KV sequence before the chunks run
  std::vector<PlannedChunk> chunks;  // decode tokens first, then prefill chunks
  int64_t n_tokens() const {
    int64_t n = 0;
    for (const auto& c : chunks) n += c.n;
    return n;
  }
};

class Scheduler {
 public:
  explicit Scheduler(const SchedulerConfig& c) : c_(c) {}

  // A new waiting sequence with n_tokens (>= 1) known tokens (its prompt).
  void add(SeqId id, int priority, int64_t n_tokens, ChunkRule rule = {});
  // Marks id cancelled; plan() drops it (frees its pages) at the next step.
  void cancel(SeqId id);
  // Plans the next step and books its pages. `admit(id)`, when given, is asked
  // before each admission: it returns the tokens already in the KV for the new
  // sequence (prefix-cache hook; 0 = prefill everything) or -1 to refuse it now.
  StepPlan plan(const std::function<int64_t(SeqId)>& admit = {});
  // The plan's chunks ran: their tokens are in the KV.
  void done(const StepPlan& p);
  // A token was sampled for id: one more known token to compute.
  void append(SeqId id);
  // id's next decode may carry n draft tokens: after everything else is planned,
  // as far as the leftover budget, the context and the free pages allow (drafts
  // never preempt nor delay an admission); reset by each plan().
  void set_draft(SeqId id, int64_t n);
  // n of id's computed tokens (rejected drafts) left the KV: their pages return.
  void rollback(SeqId id, int64_t n);
  // Removes id (finished); its pages return to the pool.
  void finish(SeqId id);

  int64_t pages_for(int64_t n_tokens) const;
  int64_t used_pages() const { return used_; }
  int64_t free_pages() const { return c_.total_pages - used_; }
  int n_running() const;
  int n_waiting() const;
  bool empty() const { return seqs_.empty(); }
  bool contains(SeqId id) const { return seqs_.count(id) != 0; }
  int64_t n_computed(SeqId id) const;
  int64_t n_preemptions() const { return n_preemptions_; }
  const SchedulerConfig& config() const { return c_; }

 private:
  struct Entry {
    int priority = 0;
    uint64_t arrival = 0;   // add() order: FCFS within a priority
    uint64_t admitted = 0;  // admission order: the most junior is preempted first
    bool running = false;
    bool cancelled = false;
    int64_t n_tokens = 0;    // known tokens (prompt + sampled)
    int64_t n_computed = 0;  // tokens in the KV
    int64_t pages = 0;       // pages booked (for n_computed + the planned chunk)
    int64_t n_draft = 0;     // draft tokens offered for the next decode
    ChunkRule rule;
  };
  // The most of n tokens e's next chunk may take under its ChunkRule.
  static int64_t chunk_len(const Entry& e, int64_t n);
  // Pages a sequence must still book to prefill its known tokens and decode one more.
  int64_t outstanding(const Entry& e) const;
  std::vector<SeqId> ordered(bool running) const;
  void preempt(SeqId id, Entry& e, StepPlan& p);
  // Offered drafts join their decode chunks, senior first, as far as the
  // budget, the context and the free pages allow; books their pages.
  void plan_drafts(StepPlan& p, int64_t budget);
  void plan_running(StepPlan& p, int64_t& budget);
  void plan_admissions(StepPlan& p, int64_t& budget, const std::function<int64_t(SeqId)>& admit);

  SchedulerConfig c_;
  std::map<SeqId, Entry> seqs_;
  int64_t used_ = 0;
  uint64_t next_arrival_ = 0, next_admit_ = 0;
  int64_t n_preemptions_ = 0;
};

}  // namespace tkv::runtime
