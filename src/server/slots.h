// Server slots in llama.cpp's sense (--parallel N of them; GET /slots, POST
// /slots/{id}?action=save|restore|erase). The engine has no fixed per-slot KV:
// all requests share one continuous batch and one paged, prefix-shared cache.
// A slot is a name for a token sequence whose KV the engine can produce again
// without prefill: the prompt + output of the last request that ran on it (its
// full pages stay in the prefix cache), or a snapshot restored into it, which
// the next request on the slot loads for the prefix both share. Saving runs the
// slot's tokens once more with save_session (cached pages reused, the tail
// computed) so the file always holds exactly those tokens' KV.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace tkv::server {

struct Slot {
  std::vector<int32_t> tokens;  // what its KV holds: prompt + output, or a restored snapshot's
  std::string snapshot;         // a restored file (path) the next request on it loads
  bool busy = false;            // a request or an action runs on it
};

class SlotTable {
 public:
  void init(int n_slots, int64_t n_ctx);
  int size() const { return static_cast<int>(slots_.size()); }

  // A slot for a request with this prompt, marked busy: `want` >= 0 asks for
  // that one (out of range: 400, busy: 409); else the free slot that shares the
  // longest prefix with the prompt, lowest id first; -1 when none is free (the
  // request runs without one). *snapshot: a restored file to load, or empty.
  MaybeError acquire(int want, const std::vector<int32_t>& prompt, int* id, std::string* snapshot);
  // Ends a request's run on slot id: it now holds these tokens.
  void release(int id, std::vector<int32_t> tokens);
  // A request on slot id was refused: the slot is as it was, not busy.
  void unbusy(int id);
  // For an action: slot id marked busy, its state copied out (400/409 as acquire).
  MaybeError take(int id, Slot* out);
  // Ends an action: the slot's new state, not busy.
  void put(int id, Slot s);
  // GET /slots: one object per slot.
  nlohmann::json list() const;

 private:
  MaybeError check_id(int id) const;
  mutable std::mutex mu_;
  std::vector<Slot> slots_;
  int64_t n_ctx_ = 0;
};

// A snapshot file name inside dir (a canonical absolute path): a bare name, no
// "..", no separators, no absolute path, not empty; a symlink there must resolve
// inside dir. The full path, or 400 with the reason.
MaybeError slot_file_path(const std::string& dir, const std::string& name, std::string* path);

}  // namespace tkv::server
