// Read-only whole-file mmap (POSIX) and the SIGBUS handler for files that
// shrink while mapped (see mmap_file.h). The handler only reads a fixed table
// of atomics and calls async-signal-safe functions (write, _exit, siglongjmp).
#include "io/mmap_file.h"

#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

namespace tkv::io {
namespace {

constexpr int kMaxMappings = 64;
constexpr size_t kPathChars = 240;

struct Region {
  std::atomic<uintptr_t> begin{0}, end{0};
  char path[kPathChars] = {};
};
Region g_regions[kMaxMappings];
std::mutex g_regions_mu;  // guards slot allocation (never taken in the handler)
struct sigaction g_prev_bus {};
thread_local sigjmp_buf* t_guard = nullptr;

int find_region(uintptr_t a) {
  for (int i = 0; i < kMaxMappings; ++i) {
    const uintptr_t b = g_regions[i].begin.load(std::memory_order_acquire);
    if (b != 0 && a >= b && a < g_regions[i].end.load(std::memory_order_acquire)) return i;
  }
  return -1;
}

void on_sigbus(int sig, siginfo_t* info, void* ctx) {
  const int r = find_region(reinterpret_cast<uintptr_t>(info->si_addr));
  if (r >= 0 && t_guard != nullptr) siglongjmp(*t_guard, 1);
  if (r >= 0) {
    static const char kHead[] = "error: [mmap] ";
    static const char kTail[] =
        ": the file was truncated while mapped; its data can no longer "
        "be read\n";
    ssize_t ignored = ::write(2, kHead, sizeof kHead - 1);
    ignored = ::write(2, g_regions[r].path, ::strnlen(g_regions[r].path, kPathChars));
    ignored = ::write(2, kTail, sizeof kTail - 1);
    (void)ignored;
    ::_exit(EXIT_FAILURE);
  }
  // Not ours: behave as if we had never been installed.
  if (g_prev_bus.sa_flags & SA_SIGINFO) {
    if (g_prev_bus.sa_sigaction != nullptr) return g_prev_bus.sa_sigaction(sig, info, ctx);
  } else if (g_prev_bus.sa_handler != SIG_DFL && g_prev_bus.sa_handler != SIG_IGN) {
    return g_prev_bus.sa_handler(sig);
  }
  ::signal(SIGBUS, SIG_DFL);
  ::raise(SIGBUS);
}

int register_region(const void* addr, size_t size, const std::string& path) {
  std::lock_guard<std::mutex> lk(g_regions_mu);
  static const bool installed = [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;  // NODEFER: siglongjmp leaves the handler
    sigemptyset(&sa.sa_mask);
    return ::sigaction(SIGBUS, &sa, &g_prev_bus) == 0;
  }();
  if (!installed) return -1;
  for (int i = 0; i < kMaxMappings; ++i) {
    if (g_regions[i].begin.load() != 0) continue;
    std::strncpy(g_regions[i].path, path.c_str(), kPathChars - 1);
    g_regions[i].end.store(reinterpret_cast<uintptr_t>(addr) + size);
    g_regions[i].begin.store(reinterpret_cast<uintptr_t>(addr), std::memory_order_release);
    return i;
  }
  return -1;  // table full: this mapping keeps the default SIGBUS behaviour
}

}  // namespace

Result<std::unique_ptr<MmapFile>> MmapFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return make_error(StatusCode::kIo, "[mmap] {}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return make_error(StatusCode::kIo, "[mmap] {}: fstat failed: {}", path, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(StatusCode::kIo, "[mmap] {}: not a regular file", path);
  }
  std::unique_ptr<MmapFile> f(new MmapFile());
  f->size_ = static_cast<size_t>(st.st_size);
  f->path_ = path;
  if (f->size_ > 0) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return make_error(StatusCode::kIo, "[mmap] {}: mmap of {} bytes failed: {}", path, f->size_,
                        std::strerror(err));
    }
    f->addr_ = p;
    f->slot_ = register_region(p, f->size_, path);
  }
  ::close(fd);  // the mapping keeps the file referenced
  return f;
}

Status MmapFile::guarded_read(void (*fn)(void*), void* arg) const {
  sigjmp_buf env;
  sigjmp_buf* const outer = t_guard;
  if (sigsetjmp(env, 1) != 0) {
    t_guard = outer;
    struct stat st {};
    const long long now = ::stat(path_.c_str(), &st) == 0 ? st.st_size : -1;
    return make_error(StatusCode::kDataLoss,
                      "[mmap] {}: the file was truncated while mapped ({} bytes mapped, {} now)",
                      path_, size_, now);
  }
  t_guard = &env;
  fn(arg);
  t_guard = outer;
  return Status();
}

MmapFile::~MmapFile() {
  if (slot_ >= 0) {
    std::lock_guard<std::mutex> lk(g_regions_mu);
    g_regions[slot_].begin.store(0, std::memory_order_release);
  }
  if (addr_ != nullptr) ::munmap(addr_, size_);
}

}  // namespace tkv::io
