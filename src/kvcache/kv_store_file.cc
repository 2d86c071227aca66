// kv-store file I/O: atomic replace (temp file in the target's directory, write,
// fsync, rename, fsync the directory), so a crash at any point leaves the old
// complete file or the new complete file at the path, never a mix.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "kvcache/kv_store.h"

namespace tkv::kv {
namespace {

Status io_error(const std::string& what, const std::string& path) {
  return make_error(StatusCode::kInternal, "[kv-store] {} {}: {}", what, path,
                    std::strerror(errno));
}

bool write_all(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

// The temp file is never a symlink someone left there (O_NOFOLLOW): a write
// stays in the target's directory.
Status write_file_atomic(const std::string& path, const std::vector<uint8_t>& bytes) {
  const std::filesystem::path target(path);
  std::filesystem::path dir = target.parent_path();
  if (dir.empty()) dir = ".";
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return io_error("cannot create", tmp);
  if (!write_all(fd, bytes.data(), bytes.size()) || ::fsync(fd) != 0) {
    Status st = io_error("cannot write", tmp);
    ::close(fd);
    ::unlink(tmp.c_str());
    return st;
  }
  if (::close(fd) != 0) {
    Status st = io_error("cannot close", tmp);
    ::unlink(tmp.c_str());
    return st;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Status st = io_error("cannot rename a snapshot onto", path);
    ::unlink(tmp.c_str());
    return st;
  }
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return io_error("cannot open the directory of", path);
  const int rc = ::fsync(dfd);
  ::close(dfd);
  if (rc != 0) return io_error("cannot fsync the directory of", path);
  return Status();
}

Result<std::vector<uint8_t>> read_whole_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return make_error(StatusCode::kNotFound, "[kv-store] cannot open {}: {}", path,
                      std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return invalid_argument("[kv-store] {} is not a regular file", path);
  }
  std::vector<uint8_t> b(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < b.size()) {
    const ssize_t r = ::read(fd, b.data() + got, b.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  b.resize(got);
  return b;
}

Result<Snapshot> read_snapshot(const std::string& path) {
  TKV_ASSIGN_OR_RETURN(std::vector<uint8_t> b, read_whole_file(path));
  return decode_snapshot(b.data(), b.size(), path);
}

}  // namespace tkv::kv
