// tkv_cuda_bench --gemv: the decode GEMV (gemv_cuda) per weight type and shape.
#pragma once

namespace tkv::bench {

// Times gemv_cuda on the model shapes of docs/bench/cuda.md ("Decode GEMV"), prints a
// markdown table and writes JSON to out_path; returns the process exit code.
int run_gemv(const char* out_path, bool quick);

}  // namespace tkv::bench
