// The slot table and snapshot file names confined to --slot-save-path (slots.h).
#include "server/slots.h"

#include <sys/stat.h>

#include <climits>
#include <cstdlib>

namespace tkv::server {
namespace {

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i;
}

ApiError busy_error(int id) {
  return ApiError{409,
                  "slot " + std::to_string(id) + " is busy (a request or an action runs on it)",
                  "invalid_request_error", "", "slot_busy"};
}

}  // namespace

void SlotTable::init(int n_slots, int64_t n_ctx) {
  std::lock_guard<std::mutex> lk(mu_);
  slots_.assign(static_cast<size_t>(n_slots), Slot{});
  n_ctx_ = n_ctx;
}

MaybeError SlotTable::check_id(int id) const {
  if (id < 0 || id >= size())
    return bad_request("slot id " + std::to_string(id) + " out of range (valid: 0 to " +
                           std::to_string(size() - 1) + ", --parallel slots)",
                       "id_slot");
  return std::nullopt;
}

MaybeError SlotTable::acquire(int want, const std::vector<int32_t>& prompt, int* id,
                              std::string* snapshot) {
  std::lock_guard<std::mutex> lk(mu_);
  *id = -1;
  if (want >= 0) {
    if (auto e = check_id(want)) return e;
    if (slots_[static_cast<size_t>(want)].busy) return busy_error(want);
    *id = want;
  } else {
    size_t best = 0;
    for (int i = 0; i < size(); ++i) {
      const Slot& s = slots_[static_cast<size_t>(i)];
      if (s.busy) continue;
      const size_t n = common_prefix(s.tokens, prompt);
      if (*id < 0 || n > best) {
        *id = i;
        best = n;
      }
    }
    if (*id < 0) return std::nullopt;
  }
  Slot& s = slots_[static_cast<size_t>(*id)];
  s.busy = true;
  *snapshot = s.snapshot;
  return std::nullopt;
}

void SlotTable::release(int id, std::vector<int32_t> tokens) {
  std::lock_guard<std::mutex> lk(mu_);
  Slot& s = slots_.at(static_cast<size_t>(id));
  s.tokens = std::move(tokens);
  s.snapshot.clear();  // its KV is this request's now (the snapshot's prefix included)
  s.busy = false;
}

void SlotTable::unbusy(int id) {
  std::lock_guard<std::mutex> lk(mu_);
  slots_.at(static_cast<size_t>(id)).busy = false;
}

MaybeError SlotTable::take(int id, Slot* out) {
  std::lock_guard<std::mutex> lk(mu_);
  if (auto e = check_id(id)) return e;
  Slot& s = slots_[static_cast<size_t>(id)];
  if (s.busy) return busy_error(id);
  s.busy = true;
  *out = s;
  return std::nullopt;
}

void SlotTable::put(int id, Slot s) {
  std::lock_guard<std::mutex> lk(mu_);
  s.busy = false;
  slots_.at(static_cast<size_t>(id)) = std::move(s);
}

nlohmann::json SlotTable::list() const {
  std::lock_guard<std::mutex> lk(mu_);
  nlohmann::json out = nlohmann::json::array();
  for (int i = 0; i < size(); ++i) {
    const Slot& s = slots_[static_cast<size_t>(i)];
    out.push_back({{"id", i},
                   {"n_ctx", n_ctx_},
                   {"is_processing", s.busy},
                   {"n_cached_tokens", s.tokens.size()},
                   {"restored", !s.snapshot.empty()}});
  }
  return out;
}

MaybeError slot_file_path(const std::string& dir, const std::string& name, std::string* path) {
  auto refuse = [&](const std::string& why) {
    return bad_request("filename '" + name + "' refused: " + why, "filename");
  };
  if (name.empty()) return bad_request("'filename' is empty", "filename");
  if (name.size() > 255) return refuse("longer than 255 bytes");
  if (name.front() == '/') return refuse("absolute paths are not allowed");
  if (name.find("..") != std::string::npos) return refuse("'..' is not allowed");
  if (name.find('/') != std::string::npos || name.find('\\') != std::string::npos)
    return refuse("path separators are not allowed (a bare name in --slot-save-path)");
  if (name == ".") return refuse("not a file name");
  for (unsigned char c : name)
    if (c < 0x20 || c == 0x7f) return refuse("control characters are not allowed");
  *path = dir + "/" + name;
  struct stat st {};
  if (::lstat(path->c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    char real[PATH_MAX];
    if (!::realpath(path->c_str(), real) || std::string(real).rfind(dir + "/", 0) != 0)
      return refuse("a symlink that points out of --slot-save-path");
  }
  return std::nullopt;
}

}  // namespace tkv::server
