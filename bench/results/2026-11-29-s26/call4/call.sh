#!/usr/bin/env bash
# Session 26, call 4: mcd.comp's Q6_K pieces read with word loads (as before the device rows)
# against 16-byte loads, odd row strides or not.
set -uo pipefail
source .gl/device-env.sh
log=$OUT/kernel-sweep-q6words.log
f='BM_Product/type:14/K:(2560|10240)/N:(2560|10240|65536)/T:(8)/barrier:1/form:2'
for v in main new pad=RWKVD_VK_Q6_ROW_PAD=1 words words_pad=RWKVD_VK_Q6_ROW_PAD=1; do
  name=${v%%=*} envs=""; [[ $v == *=* ]] && envs=${v#*=}
  bin=.gl/vk_kernel_bench; [[ $name == main ]] && bin=.gl/vk_kernel_bench-base
  [[ $name == words* ]] && bin=.gl/vk_kernel_bench-words
  echo "== $name" >>$log
  (IFS=, && for kv in $envs; do [[ -n $kv ]] && export "${kv?}"; done
   timeout 120 $bin --benchmark_filter="$f" 2>&1) | grep -E "^BM_" | sed -E 's/ +/ /g' >>$log
done
python3 .gl/sweep-table $log
RWKVD_VK_PIPELINE_STATS=1 timeout 60 .gl/vk_kernel_bench-words --benchmark_filter='BM_Product/type:14/K:2560/N:10240/T:8/barrier:1/form:2' 2>&1 | grep -iE "mcd" | head -3
