// Cross-checks of a ModelConfig before anything is allocated for it: heads,
// dims, rope, norms, windows and counts against each other and against the
// file (a layer needs tensors), so the binder and forward pass only see sane values.
#pragma once
#include "base/status.h"
#include "model/config.h"

namespace tkv::io {
class GgufFile;
}

namespace tkv::model {

// Errors start with "[model] <path>:" and name the value and its valid range.
Status validate_config(const ModelConfig& cfg, const io::GgufFile& gguf);

}  // namespace tkv::model
