// Session snapshots in the engine loop (SeqRequest::save_session / load_session):
// a snapshot is one more prefix source beside the in-memory prefix cache. It is
// read and checked completely at submit (so a bad file is refused before any
// work and the cache is never touched by it), its pages are copied into the new
// sequence at admission, and the finished request's KV is written at finish.
#include "base/log.h"
#include "runtime/engine_loop.h"
#include "runtime/model_identity.h"

namespace tkv::runtime {
namespace {

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i;
}

}  // namespace

Result<kv::SnapshotHeader> EngineLoop::snapshot_header() const {
  std::lock_guard<std::mutex> lk(snap_mu_);
  if (!snap_header_) {
    snap_header_ = [&]() -> Result<kv::SnapshotHeader> {
      TKV_ASSIGN_OR_RETURN(kv::SnapshotHeader h, cache_->snapshot_header());
      if (model_id_) {
        h.model_id = *model_id_;  // hashed by create (--prompt-cache): not twice
      } else {
        TKV_ASSIGN_OR_RETURN(h.model_id, model_identity(model_->gguf()));
      }
      h.key_center = opts_.key_center;
      return h;
    }();
  }
  return *snap_header_;
}

Status EngineLoop::check_session(SeqRequest& r) const {
  if (r.on_logits || (r.save_session.empty() && r.load_session.empty())) return Status();
  if (model_->backend() != ops::Backend::kCpu)  // the KV bytes live on the device
    return make_error(StatusCode::kUnimplemented,
                      "[kv-store] session files are not supported with --device cuda yet");
  TKV_ASSIGN_OR_RETURN(const kv::SnapshotHeader mine, snapshot_header());
  if (r.load_session.empty()) return Status();
  TKV_ASSIGN_OR_RETURN(kv::Snapshot snap, kv::read_snapshot(r.load_session));
  TKV_RETURN_IF_ERROR(kv::check_snapshot_compatible(snap.header, mine, r.load_session));
  const auto& t = snap.header.tokens;
  if (!r.load_common &&
      (t.size() > r.prompt.size() || !std::equal(t.begin(), t.end(), r.prompt.begin()))) {
    const size_t i = common_prefix(t, r.prompt);
    return invalid_argument(
        "[kv-store] {}: the snapshot's {} tokens are not a prefix of the prompt's {} tokens "
        "(they differ from token {} on)",
        r.load_session, t.size(), r.prompt.size(), i);
  }
  r.loaded = std::make_shared<const kv::Snapshot>(std::move(snap));
  return Status();
}

// Copies the snapshot's pages into s's new KV sequence: the tokens both start
// with (all the snapshot's unless load_common) but never s's last one (whose
// logits the first step needs).
int64_t EngineLoop::load_session(Sequence& s) {
  const int64_t n =
      std::min<int64_t>(static_cast<int64_t>(common_prefix(s.req.loaded->header.tokens, s.tokens)),
                        static_cast<int64_t>(s.tokens.size()) - 1);
  if (n <= 0) return 0;
  const Status st = cache_->import_seq(s.kv, *s.req.loaded, n);
  if (!st.ok()) {  // no room now: prefill instead (the cache is unchanged)
    TKV_LOG_WARN("{}; prefilling the prompt instead", st.message());
    return 0;
  }
  return n;
}

void EngineLoop::save_session(const Sequence& s, Event* e) const {
  if (s.kv < 0) {
    e->session_error =
        fmt::format("[kv-store] {}: not written: the request holds no KV (it ended before it ran)",
                    s.req.save_session);
    return;
  }
  auto h = snapshot_header();
  if (!h.ok()) {
    e->session_error = h.status().message();
    return;
  }
  // A speculative run that ended inside its accepted drafts leaves their KV past
  // the last streamed token: those rows are not part of the session.
  const int64_t n = std::min<int64_t>(cache_->seq_len(s.kv), static_cast<int64_t>(s.tokens.size()));
  h.value().tokens.assign(s.tokens.begin(), s.tokens.begin() + n);
  std::vector<std::vector<uint8_t>> pages;
  Status st = cache_->export_seq(s.kv, n, &pages);
  if (st.ok()) {
    auto bytes = kv::encode_snapshot(h.value(), pages);
    st = bytes.ok() ? kv::write_file_atomic(s.req.save_session, bytes.value()) : bytes.status();
  }
  if (!st.ok()) {
    e->session_error = st.message();
    return;
  }
  e->session_tokens = n;
}

}  // namespace tkv::runtime
