#!/usr/bin/env bash
# Session 25's second call: mvq.comp's pairs (a lane takes pieces 2m, 2m + 1 together, one header
# load and one scale decoding for 64 weights) against single pieces, kernels then end to end.
# Device run, carry [".gl"]: bash .gl/call2.sh
set -uo pipefail
source .gl/table.sh
f='BM_Product/type:1[24]/K:(768|3072|2560|10240)/N:(768|3072|2560|10240|65536)/T:(1|8)/barrier:1/form:1'
v="pairs= single=RWKVD_VK_MVQ_PAIRS=0 pairs_u4=RWKVD_VK_MVQ_PIECES=4 pairs_r2=RWKVD_VK_MV_ROWS=2"
v+=" pairs_wg128=RWKVD_VK_MVQ_WG=128 single_r2=RWKVD_VK_MVQ_PAIRS=0,RWKVD_VK_MV_ROWS=2"
bash .gl/device-kernel-sweep.sh "$f" "$v" >/dev/null
mv $OUT/kernel-sweep.log $OUT/kernel-sweep-pairs.log
echo "== pairs (us)"; table $OUT/kernel-sweep-pairs.log
BENCH_QUICK=1 BENCH_REPEATS=2 BENCH_TIMEOUT=150 bash .gl/device-ab.sh "2.9b:q4_k_m 0.1b:q4_k_m 1.5b:q4_k_m" \
  "single=.gl/rwkvd,RWKVD_VK_MVQ_PAIRS=0 pairs=.gl/rwkvd" 2
