// libFuzzer target: any byte string given to GgufFile::parse must yield a
// parsed file or a "[gguf] ..." Status, never a crash, hang or OOB read
// (ASan + UBSan instrument the reader). Seeds: tests/fuzz/corpus/gguf_fuzz (make_seeds.py).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/log.h"
#include "io/gguf.h"

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  tkv::set_log_level(
      tkv::LogLevel::kError);  // the *_or getters warn on type mismatches: noise here
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An exact-size heap copy, so ASan flags any read past the end of the image.
  std::vector<uint8_t> image(data, data + size);
  auto r = tkv::io::GgufFile::parse(image.data(), image.size(), "fuzz");
  if (!r.ok()) {
    if (std::strncmp(r.status().message().c_str(), "[gguf] fuzz: ", 13) != 0) std::abort();
    return 0;
  }
  // Touch everything the reader promises is valid: metadata and every tensor byte.
  const tkv::io::GgufFile& f = *r.value();
  size_t sum = f.metadata().size();
  for (const auto& t : f.tensors()) {
    if (t.data < image.data() || t.data + t.n_bytes > image.data() + image.size()) std::abort();
    for (size_t i = 0; i < t.n_bytes; ++i) sum += t.data[i];
    if (f.find_tensor(t.name) == nullptr) std::abort();
  }
  (void)f.get_string_or("general.architecture", "");
  (void)f.get_u64_or("general.alignment", 0);
  volatile size_t sink = sum;
  (void)sink;
  return 0;
}
