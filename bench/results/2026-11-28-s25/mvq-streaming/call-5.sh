#!/usr/bin/env bash
# Session 25's fifth call: which part of mvq.comp's arithmetic costs its time? Diagnostic builds of
# the real product with one part knocked out: e = no scale decoding, f = no int -> float of the
# integer sums, g = no integer dot products, h = e and f; c = loads alone (as call 3).
set -uo pipefail
source .gl/table.sh
f='BM_Product/type:1[24]/K:(2560|10240)/N:(2560|10240|65536)/T:1/barrier:1/form:1'
v="base=RWKVD_VK_MVQ_PAIRS=0"
for d in c e f g h; do v+=" $d=RWKVD_VK_MVQ_DIAG=$d"; done
RWKVD_VK_PIPELINE_STATS=1 bash .gl/device-kernel-sweep.sh "$f" "$v" >/dev/null
mv $OUT/kernel-sweep.log $OUT/kernel-sweep-knockout.log
echo "== knockout (us)"; table $OUT/kernel-sweep-knockout.log
source .gl/device-env.sh
for d in e f g h; do
  RWKVD_VK_MVQ_DIAG=$d RWKVD_VK_PIPELINE_STATS=1 .gl/vk_kernel_bench --benchmark_filter='BM_Product/type:12/K:2560/N:65536/T:1/barrier:1/form:1' 2>&1 | grep "pipeline mvq.*Register"
done
