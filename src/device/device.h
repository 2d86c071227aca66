// Device queries that build with or without CUDA: how many CUDA devices the
// process sees (0 when CUDA is not built or no driver/GPU is present) and a
// one-line description of device 0, for test skips and benchmark headers.
#pragma once
#include <string>

namespace tkv::device {

// Number of usable CUDA devices; 0 (never an error) when none or not built.
int cuda_device_count();
// "NVIDIA H200, 132 SMs, 139.8 GiB" or the reason there is none.
std::string cuda_device_summary();

}  // namespace tkv::device
