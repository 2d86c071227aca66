// mem_info.h implementation.
#include "base/mem_info.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace tkv {

size_t mem_available_bytes() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) return 0;
  char line[256];
  size_t kib = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    unsigned long long v = 0;
    if (std::sscanf(line, "MemAvailable: %llu kB", &v) == 1) {
      kib = static_cast<size_t>(v);
      break;
    }
  }
  std::fclose(f);
  return kib > SIZE_MAX / 1024 ? SIZE_MAX : kib * 1024;
}

Result<size_t> parse_byte_size(std::string_view text) {
  const std::string s(text);
  const auto bad = [&] {
    return invalid_argument(
        "[mem] bad byte size '{}' (valid: a positive number with an optional unit: B, K/M/G/T, "
        "KiB/MiB/GiB/TiB, KB/MB/GB/TB; e.g. 512MiB, 8GiB, 2G)",
        s);
  };
  if (s.empty()) return bad();
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || !std::isfinite(v) || v <= 0) return bad();
  const std::string unit(end);
  struct Unit {
    const char* name;
    double mul;
  };
  static constexpr Unit kUnits[] = {{"", 1.0},
                                    {"B", 1.0},
                                    {"K", 1024.0},
                                    {"KiB", 1024.0},
                                    {"KB", 1e3},
                                    {"M", 1048576.0},
                                    {"MiB", 1048576.0},
                                    {"MB", 1e6},
                                    {"G", 1073741824.0},
                                    {"GiB", 1073741824.0},
                                    {"GB", 1e9},
                                    {"T", 1099511627776.0},
                                    {"TiB", 1099511627776.0},
                                    {"TB", 1e12}};
  for (const Unit& u : kUnits) {
    if (unit != u.name) continue;
    const double bytes = std::floor(v * u.mul);
    // 2^64 as a double: anything at or past it does not fit in size_t.
    if (bytes < 1 || bytes >= 18446744073709551616.0) return bad();
    return static_cast<size_t>(bytes);
  }
  return bad();
}

std::string format_bytes(size_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1073741824.0) return fmt::format("{:.2f} GiB", b / 1073741824.0);
  if (b >= 1048576.0) return fmt::format("{:.1f} MiB", b / 1048576.0);
  if (b >= 1024.0) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{} B", bytes);
}

}  // namespace tkv
