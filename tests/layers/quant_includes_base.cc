// Compiled by ctest with tkv_quant's include directories: its own layer and base are visible.
#include "base/status.h"
#include "quant/kv_scheme.h"
