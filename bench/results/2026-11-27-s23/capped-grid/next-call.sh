#!/usr/bin/env bash
# Would a persistent decode kernel's capped grid cost 0.1B's products? (PERFORMANCE.md "Next",
# session 23.) One call: 0.1B's one-token int8 products in vk_kernel_bench with the row kernels'
# grids capped at 264 / 132 / 66 workgroups ($RWKVD_VK_MAX_ROW_GROUPS) against none, then 0.1B
# and 2.9B Q4_K_M gen-1 end to end with the same caps, alternating.
# Prepare: scripts/bench-device; strip -o .gl/vk_kernel_bench build/bench/vk_kernel_bench;
# cp -L /usr/lib/x86_64-linux-gnu/libbenchmark.so.1debian .gl/lib/
# Device run, carry [".gl"]: bash .gl/cap-exp.sh
set -uo pipefail
bash .gl/device-kernel-sweep.sh 'BM_Product/type:1[24]/K:(768|3072)/N:(768|3072)/T:1/barrier:1/form:1' \
  "base= c264=RWKVD_VK_MAX_ROW_GROUPS=264 c132=RWKVD_VK_MAX_ROW_GROUPS=132 c66=RWKVD_VK_MAX_ROW_GROUPS=66"
BENCH_QUICK=1 BENCH_REPEATS=2 BENCH_TIMEOUT=150 bash .gl/device-ab.sh "0.1b:q4_k_m 2.9b:q4_k_m" \
  "base=.gl/rwkvd c264=.gl/rwkvd,RWKVD_VK_MAX_ROW_GROUPS=264 c132=.gl/rwkvd,RWKVD_VK_MAX_ROW_GROUPS=132" 2
