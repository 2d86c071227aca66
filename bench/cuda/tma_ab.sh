#!/usr/bin/env bash
# Interleaved A/B of TMA variants (TKV_MMA_CFG) on the k8 target shapes, TKV_AB_REPS rounds;
# prints per-variant geometric means and the winner (lowest), lines to $OUT/ab.txt.
set -o pipefail
C=${TKV_CARRY:-build/h-cuda2-carry}
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
L=$OUT/ab.txt
for rep in $(seq ${TKV_AB_REPS:-3}); do
  for c in ${TKV_AB_CFGS:-1 3}; do
    for s in k8v3 k8v4; do
      for args in "--quick" "--batch 8 --ctx 131072"; do
        TKV_MMA_CFG=$c timeout 60 $C/bin/tkv_cuda_bench --scheme $s $args --no-encode --out /tmp/b.json 2>&1 |
          grep turbokv | sed "s/^/rep $rep cfg $c: /" >> $L
      done
    done
  done
done
awk '{k=$6" "$7" "$8; c=$4; sub(":","",c); us[c" "k]+=log($9); n[c" "k]++; cf[c]=1; ky[k]=1}
  END {best=""; for (c in cf) {g=0; m=0; for (k in ky) {g+=us[c" "k]/n[c" "k]; m++}
         printf "cfg %s geomean %.2f us over %d shapes\n", c, exp(g/m), m; if (best=="" || g<bg) {best=c; bg=g}}
       for (k in ky) {printf "%s:", k; for (c in cf) printf " cfg %s %.1f", c, exp(us[c" "k]/n[c" "k]); printf "\n"}
       print "winner " best}' $L | tee -a $L
