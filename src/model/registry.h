// Architecture registry: each model/arch/<name>.cc registers one ArchSpec at
// static-init time (the library is linked whole-archive), so adding an
// architecture never edits a central switch.
#pragma once
#include <string>
#include <vector>

#include "base/status.h"
#include "model/config.h"

namespace tkv::io {
class GgufFile;
}

namespace tkv::model {

struct ArchSpec {
  const char* name;  // GGUF general.architecture value
  // Fills cfg from metadata; errors name the missing/invalid key.
  Status (*configure)(const io::GgufFile& gguf, ModelConfig& cfg);
};

void register_arch(const ArchSpec& spec);
const ArchSpec* find_arch(const std::string& name);
std::vector<std::string> registered_archs();

struct ArchRegistrar {
  explicit ArchRegistrar(const ArchSpec& spec) { register_arch(spec); }
};

// Reads the hparams every decoder shares under "<arch>.": block_count,
// embedding_length, feed_forward_length, attention.head_count(_kv),
// key_length, layer_norm_rms_epsilon, rope.freq_base, context_length.
// Integers are range-checked here (kMax* in config.h); cross-checks between
// values are validate_config's job.
Status read_common_hparams(const io::GgufFile& gguf, const std::string& arch, ModelConfig& cfg);
// One optional integer key in [lo, hi] (def when absent); errors name the key.
Status read_int_key(const io::GgufFile& gguf, const std::string& key, int64_t lo, int64_t hi,
                    int64_t def, int64_t* dst);
// One optional float key (def when absent); values past float range become inf.
Status read_float_key(const io::GgufFile& gguf, const std::string& key, double def, float* dst);

}  // namespace tkv::model
