#!/usr/bin/env bash
# Session 26, call 3: why mcd.comp's Q6_K products slowed with the device rows (row stride?
# registers?), and the 2.9B decode profile of main against the new rows.
set -uo pipefail
source .gl/device-env.sh
log=$OUT/kernel-sweep-q6pad.log
f='BM_Product/type:14/K:(768|3072|2560|10240)/N:(768|3072|2560|10240|65536)/T:(1|8)/barrier:1/form:[12]'
for v in main new pad=RWKVD_VK_Q6_ROW_PAD=1; do
  name=${v%%=*} envs=""; [[ $v == *=* ]] && envs=${v#*=}
  bin=.gl/vk_kernel_bench; [[ $name == main ]] && bin=.gl/vk_kernel_bench-base
  echo "== $name" >>$log
  (IFS=, && for kv in $envs; do [[ -n $kv ]] && export "${kv?}"; done
   timeout 120 $bin --benchmark_filter="$f" 2>&1) | grep -E "^BM_" | sed -E 's/ +/ /g' >>$log
done
python3 .gl/sweep-table $log
for b in .gl/vk_kernel_bench-base .gl/vk_kernel_bench; do
  echo "== stats $b"
  RWKVD_VK_PIPELINE_STATS=1 timeout 60 $b --benchmark_filter='BM_Product/type:14/K:2560/N:10240/T:8/barrier:1/form:[12]' 2>&1 | grep -iE "mcd|mvq" | head -12
done
BENCH_TIMEOUT=200 bash .gl/device-profile.sh "2.9b:q4_k_m" "main=RWKVD_BIN=.gl/rwkvd-base new=" 1
