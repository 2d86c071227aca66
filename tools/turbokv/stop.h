// The CLI's stop-string filter is the runtime's (src/runtime/stop_stream.h).
#pragma once
#include "runtime/stop_stream.h"

namespace tkv::cli {
using runtime::StopStream;
}  // namespace tkv::cli
