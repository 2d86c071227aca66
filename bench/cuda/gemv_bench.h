// tkv_cuda_bench --gemv: the decode GEMV (gemv_cuda) per weight type and shape.
#pragma once
#include <string>

namespace tkv::bench {

// Times gemv_cuda on the model shapes of docs/bench/cuda.md ("Decode GEMV"), prints a
// markdown table and writes JSON to out_path; returns the process exit code. match: only
// the shapes whose "model matrix type tokens" label contains it (empty: all); stage_bytes:
// GemvCudaParams::stage_bytes (0: the default).
int run_gemv(const char* out_path, bool quick, const std::string& match, int stage_bytes);

}  // namespace tkv::bench
