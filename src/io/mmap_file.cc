// Read-only whole-file mmap (POSIX). MAP_PRIVATE so a writer replacing the
// file in place cannot change what we already validated (copy-on-write pages).
#include "io/mmap_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tkv::io {

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
  if (f->size_ > 0) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return make_error(StatusCode::kIo, "[mmap] {}: mmap of {} bytes failed: {}", path, f->size_,
                        std::strerror(err));
    }
    f->addr_ = p;
  }
  ::close(fd);  // the mapping keeps the file referenced
  return f;
}

MmapFile::~MmapFile() {
  if (addr_ != nullptr) ::munmap(addr_, size_);
}

}  // namespace tkv::io
