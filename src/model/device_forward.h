// The forward pass on an accelerator, behind a plain C++ interface so that model.h
// and CPU-only builds never see CUDA headers. make_cuda_forward is defined in
// forward_cuda_setup.cc (CUDA builds) or forward_no_cuda.cc (which only says why not).
// The host KvCache keeps all page bookkeeping; the device object holds the bytes.
#pragma once
#include <memory>

#include "base/status.h"
#include "kvcache/kv_cache.h"
#include "model/batch.h"
#include "model/config.h"

namespace tkv::model {

struct Weights;

class DeviceForward {
 public:
  virtual ~DeviceForward() = default;
  // One step over b: the batch is validated, cache.reserve() has run for every
  // slice and ws.pos holds the positions. Writes the new K/V into the device pages
  // (the host pools stay untouched) and fills ws.logits / ws.logits_row as
  // Model::forward does; the caller commits.
  virtual Status run(const Batch& b, Workspace& ws, const kv::KvCache& cache) = 0;
  // The cache copied page src to dst (its page-copy hook): the same copy on the device,
  // ordered before the next run().
  virtual void copy_page(int32_t src, int32_t dst) = 0;
};

// Uploads the weights (as stored) and allocates device pools mirroring cache's
// pages. Fails with a "[cuda] ..." message naming the reason when CUDA is not
// built, no device is visible, or the model or cache has a feature not on CUDA yet.
// w must outlive the result (the embedding rows are read from it on the host).
Result<std::unique_ptr<DeviceForward>> make_cuda_forward(const ModelConfig& c, const Weights& w,
                                                         const kv::KvCache& cache, bool key_center);

}  // namespace tkv::model
