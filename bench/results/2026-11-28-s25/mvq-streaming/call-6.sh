#!/usr/bin/env bash
# Session 25's sixth call: mvq.comp's scales decoded without branches (kscale_pair), single pieces
# and pairs, with and without the conversion trick (diag i), against 1c6607c's kernel; then end to
# end, 1c6607c against this build with pairs on and off.
set -uo pipefail
source .gl/table.sh
source .gl/device-env.sh
f='BM_Product/type:1[24]/K:(768|3072|2560|10240)/N:(768|3072|2560|10240|65536)/T:(1|8)/barrier:1/form:1'
log=$OUT/kernel-sweep-kscale.log
for v in old= single=RWKVD_VK_MVQ_PAIRS=0 pairs= magic=RWKVD_VK_MVQ_DIAG=i e=RWKVD_VK_MVQ_DIAG=e; do
  name=${v%%=*} envs=${v#*=}
  bin=.gl/vk_kernel_bench; [[ $name == old ]] && bin=.gl/vk_kernel_bench-base
  echo "== $name" >>$log
  (IFS=, && for kv in $envs; do [[ -n $kv ]] && export "${kv?}"; done
   timeout 120 $bin --benchmark_filter="$f" 2>&1) | grep -E "^BM_" | sed -E 's/ +/ /g' >>$log
done
echo "== kscale (us)"; table $log
BENCH_QUICK=1 BENCH_REPEATS=2 BENCH_TIMEOUT=150 bash .gl/device-ab.sh "2.9b:q4_k_m 1.5b:q4_k_m 0.1b:q4_k_m" \
  "old=.gl/rwkvd-base single=.gl/rwkvd,RWKVD_VK_MVQ_PAIRS=0 pairs=.gl/rwkvd" 2
