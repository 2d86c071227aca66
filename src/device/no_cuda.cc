// Stand-in for cuda_device.cc in builds without CUDA (TKV_CUDA=OFF): no devices.
#include "device/device.h"

namespace tkv::device {

int cuda_device_count() {
  return 0;
}
std::string cuda_device_summary() {
  return "CUDA not built (TKV_CUDA=OFF)";
}

}  // namespace tkv::device
