#!/usr/bin/env bash
# Session 28 call 6: one token's int8 heads take 4 rows a subgroup (RWKVD_VK_MVQ_MANY_ROWS,
# default 32768). Kernel sweep of the heads, then end to end, the same binary with the rule off
# (old: MANY_ROWS=1000000) against on (new), alternating.
set -uo pipefail
source .gl/device-env.sh
f='BM_Product/type:1[24]/K:(768|2560)/N:65536/T:1/barrier:1/form:1'
SWEEP_TIMEOUT=60 bash .gl/device-kernel-sweep.sh "$f" "new= r1=RWKVD_VK_MVQ_MANY_ROWS=1000000 r2=RWKVD_VK_MV_ROWS=2" > $OUT/kb-summary.txt 2>&1
echo "sweep done $SECONDS s"; cat $OUT/kb-summary.txt
BENCH_QUICK=1 BENCH_REPEATS=1 BENCH_TIMEOUT=60 bash .gl/device-ab.sh "0.1b:q4_k_m 2.9b:q4_k_m 1.5b:q4_k_m" \
  "old=.gl/rwkvd,RWKVD_VK_MVQ_MANY_ROWS=1000000 new=.gl/rwkvd" 3 > $OUT/ab-summary.txt 2>&1
echo "ab done $SECONDS s"; grep -o "^[^ ]* rc=[0-9]* hash=[0-9a-f]*\|gen.b1.tok_s=[^ ]*\|gen.b8.tok_s=[^ ]*" $OUT/ab-summary.txt | paste -sd' ' | sed 's/ \([0-9.]*b-q4_k_m\)/\n\1/g'
