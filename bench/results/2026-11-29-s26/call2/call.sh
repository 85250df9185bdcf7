#!/usr/bin/env bash
# Session 26, call 2: Q6_K rows in their device form (aligned loads) and mcd.comp's chunk
# branch, kernels then end to end (main / mcd-only / both), then a profile of the new binary.
set -uo pipefail
source .gl/device-env.sh
log=$OUT/kernel-sweep-q6.log
f='BM_Product/type:14/K:(768|3072|2560|10240)/N:(768|3072|2560|10240|65536)/T:(1|8)/barrier:1/form:1'
f2='BM_Product/type:1[24]/K:(2560|10240)/N:(2560|10240|65536)/T:(8|512)/barrier:1/form:2'
for v in main new; do
  bin=.gl/vk_kernel_bench; [[ $v == main ]] && bin=.gl/vk_kernel_bench-base
  echo "== $v" >>$log
  timeout 150 $bin --benchmark_filter="$f|$f2" 2>&1 | grep -E "^BM_" | sed -E 's/ +/ /g' >>$log
done
python3 .gl/sweep-table $log
BENCH_QUICK=1 BENCH_REPEATS=2 BENCH_TIMEOUT=150 bash .gl/device-ab.sh "2.9b:q4_k_m 0.1b:q4_k_m 1.5b:q4_k_m" \
  "main=.gl/rwkvd-base mcd=.gl/rwkvd-mcd new=.gl/rwkvd" 2
