// Host memory queries and byte-size parsing for memory budgets (--kv-budget).
// MemAvailable comes from /proc/meminfo (Linux); 0 when it cannot be read.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

#include "base/status.h"

namespace tkv {

// Bytes the kernel reports as available without swapping, or 0 if unknown.
size_t mem_available_bytes();

// "512MiB", "8GiB", "2G", "1.5GB", "4096", "64K" -> bytes. K/M/G/T alone and
// KiB/MiB/GiB/TiB are powers of 1024, KB/MB/GB/TB powers of 1000. Rejects zero,
// negative, non-finite and values past SIZE_MAX with a message listing the forms.
Result<size_t> parse_byte_size(std::string_view text);

// Human form of a byte count, e.g. "4.50 GiB".
std::string format_bytes(size_t bytes);

}  // namespace tkv
