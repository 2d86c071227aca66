// Compiled by ctest with tkv_quant's include directories: model is above quant,
// so this include must not be found.
#include "model/model.h"
#include "quant/kv_scheme.h"
