#!/usr/bin/env bash
# NVIDIA's statistics of mvq.comp's pipelines (registers, binary size) for the variants timed.
set -uo pipefail
source .gl/device-env.sh
for v in base=RWKVD_VK_MVQ_PAIRS=0 pairs= r2=RWKVD_VK_MVQ_PAIRS=0,RWKVD_VK_MV_ROWS=2 a=RWKVD_VK_MVQ_DIAG=a c=RWKVD_VK_MVQ_DIAG=c d=RWKVD_VK_MVQ_DIAG=d p4=RWKVD_VK_MVQ_PAIRS=0,RWKVD_VK_MVQ_PIECES=4 p1=RWKVD_VK_MVQ_PAIRS=0,RWKVD_VK_MVQ_PIECES=1; do
  name=${v%%=*} envs=${v#*=}
  echo "== $name"
  (IFS=, && for kv in $envs; do [[ -n $kv ]] && export "${kv?}"; done
   RWKVD_VK_PIPELINE_STATS=1 .gl/vk_kernel_bench --benchmark_filter='BM_Product/type:1[24]/K:2560/N:65536/T:1/barrier:1/form:1' 2>&1 | grep -E "pipeline mvq|^BM_" | sed -E 's/ +/ /g')
done
