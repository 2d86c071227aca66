// Stands in for forward_cuda*.cc when the build has no CUDA: --device cuda then
// fails at engine start with the reason.
#include "model/device_forward.h"

namespace tkv::model {

Result<std::unique_ptr<DeviceForward>> make_cuda_forward(const ModelConfig&, const Weights&,
                                                         const kv::KvCache&, bool) {
  return make_error(StatusCode::kUnimplemented,
                    "[cuda] --device cuda: this turbokv was built without CUDA (configure with "
                    "-DTKV_CUDA=ON, e.g. scripts/build cuda-release)");
}

}  // namespace tkv::model
