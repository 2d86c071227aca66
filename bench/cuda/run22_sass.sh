#!/usr/bin/env bash
# Run 22 (docs/bench/cuda.md): where the consumer's instructions go. On the H200, from the
# carry (make_carry.sh + bench/cuda/*.sh): Nsight Compute source counters (SASS with
# executed-instruction and stall-sample counts per instruction) of the tensor-core decode at
# k8v3 B=1 x 128k and B=8 x 32k, plus the kernels' register use. Logs to $OUT.
set -o pipefail
C=${TKV_CARRY:-build/h-cuda2-carry}
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
B=${TKV_BIN:-$C/bin/tkv_cuda_bench}
(cuobjdump -res-usage $B 2>&1 | grep -A1 decode_turbo_mma | head -40) > $OUT/res-usage.txt; head -12 $OUT/res-usage.txt
for shape in "1 131072" "8 32768"; do
  set -- $shape; tag=b$1c$2
  timeout 200 ncu --clock-control none --kernel-name regex:"decode_turbo_mma_kernel" --launch-skip 5 --launch-count 1 \
    --section SourceCounters --section InstructionStats --section WarpStateStats --import-source no -o /tmp/$tag -f \
    $B --scheme k8v3 --batch $1 --ctx $2 --no-encode --no-copy --out /tmp/x.json > /tmp/ncu-$tag.log 2>&1; echo "ncu $tag rc $?"
  ncu -i /tmp/$tag.ncu-rep --page source --print-source sass --csv > $OUT/sass-$tag.csv 2>&1; echo "sass rows $(wc -l < $OUT/sass-$tag.csv)"
  ncu -i /tmp/$tag.ncu-rep --page details > $OUT/details-$tag.txt 2>&1
  cp /tmp/$tag.ncu-rep $OUT/ 2>/dev/null
done
head -3 $OUT/sass-b1c131072.csv | cut -c1-400
