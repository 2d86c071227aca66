#!/usr/bin/env bash
# Second H200 call of run 13 (its binary had the A/B knobs below; removed after, the
# default now = cfg 1): kvcodec_cuda_test in every encode configuration, an
# interleaved encode A/B (cfg bit 0: TKV_ENC_TOKEN_FAST=1, token-fastest block order as
# before; bit 1: TKV_ENC_GLOBAL_PACK=1, in-place packing in global memory as before; cfg 0 =
# that binary's default), and repeats of the small k8v3/k8v4 decode shapes. Logs to $OUT.
set -o pipefail
C=${TKV_CARRY:-build/h-cuda2-carry}
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
export TKV_SHARED_DIR=$PWD/$C/shared
envs() { echo "TKV_ENC_TOKEN_FAST=$(( $1 & 1 )) TKV_ENC_GLOBAL_PACK=$(( ($1 >> 1) & 1 ))"; }
for cfg in 0 1 2 3; do
  env $(envs $cfg) timeout 60 $C/bin/kvcodec_cuda_test > /tmp/kv$cfg.txt 2>&1
  echo "kvcodec_cuda_test cfg $cfg rc $? $(grep -E '^\[  (PASSED|FAILED)' /tmp/kv$cfg.txt)"
done | tee $OUT/kvcodec-cfgs.txt
cp /tmp/kv0.txt $OUT/kvcodec-cfg0.txt
for r in 1 2; do
  for s in k8v3 k4v3 bf16; do
    for cfg in 0 1 2 3; do
      env $(envs $cfg) timeout 30 $C/bin/tkv_cuda_bench --scheme $s --batch 1 --ctx 4096 --out /tmp/e.json 2>&1 \
        | grep "^encode" | sed "s/^/rep $r cfg $cfg: /"
    done
  done
done | tee $OUT/enc-ab.txt
for r in 1 2; do
  for s in k8v3 k8v4; do
    for b in 1 8; do
      timeout 30 $C/bin/tkv_cuda_bench --scheme $s --batch $b --ctx 4096 --no-encode --out /tmp/d.json 2>&1 | grep "^turbokv" | sed "s/^/rep $r: /"
    done
  done
done | tee $OUT/small-rep.txt
