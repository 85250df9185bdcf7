#!/usr/bin/env bash
# Session 26's first call: the prepared patches, each the same integers and bits as main (so the
# quality hashes must match), kernels and end to end, then what wkv's LoRA up loads cost.
#  - q8-slots/q8-slots.patch: the int8 form's runs in the order a Q4_K block's pieces read them;
#  - prefetch/prefetch.patch: decode prefetches the next steps' weights into the L2 beside the
#    att shift and wkv ($RWKVD_VK_PREFETCH=0 turns it off, so one binary holds both steps; 2 also
#    prefetches the ffn value's beside the ffn shift);
#  - uniform-chunk/uniform-chunk.patch: mc.comp / mcd.comp decode a chunk's scales with a branch
#    again (their lanes share the chunk): its rows are gen-8, the field analysis and prefill
#    (5-16 tokens and long chunks run on them; the q8 slots only touch 1-4 tokens).
# Prepare (here, ~10 minutes):
#   git checkout -b s26-try main && git apply bench/results/2026-11-28-s25/q8-slots/q8-slots.patch \
#     && git apply bench/results/2026-11-28-s25/prefetch/prefetch.patch \
#     && git apply bench/results/2026-11-28-s25/uniform-chunk/uniform-chunk.patch && git add -A && git commit -qm try
#   scripts/bench-device --tests --base main
#   ninja -C build-base/build vk_kernel_bench && strip -o .gl/vk_kernel_bench-base build-base/build/bench/vk_kernel_bench
#   mv .gl/fixtures /tmp/gl-fixtures; rm -f .gl/vk_tests   (the 64 MiB carry limit)
#   cp -L /usr/lib/x86_64-linux-gnu/libbenchmark.so.1debian .gl/lib/; cp this .gl/next.sh
# Device run, carry [".gl"]: bash .gl/next.sh   (~5 minutes)
set -uo pipefail
source .gl/device-env.sh
f='BM_Product/type:1[24]/K:(768|3072|2560|10240)/N:(768|3072|2560|10240|65536)/T:(1|8)/barrier:1/form:1'
log=$OUT/kernel-sweep-slots.log
# (main_q: the rows' bytes as consecutive words, against main_a, the pieces' loads: what a
# regular load scheme would give Q6_K, whose 2-byte-aligned blocks take 20 word loads a piece.)
for v in main slots main_c=RWKVD_VK_MVQ_DIAG=c slots_c=RWKVD_VK_MVQ_DIAG=c slots_d=RWKVD_VK_MVQ_DIAG=d \
  main_a=RWKVD_VK_MVQ_DIAG=a main_q=RWKVD_VK_MVQ_DIAG=q; do
  name=${v%%=*} envs=""; [[ $v == *=* ]] && envs=${v#*=}
  bin=.gl/vk_kernel_bench; [[ $name == main* ]] && bin=.gl/vk_kernel_bench-base
  echo "== $name" >>$log
  (IFS=, && for kv in $envs; do [[ -n $kv ]] && export "${kv?}"; done
   timeout 120 $bin --benchmark_filter="$f" 2>&1) | grep -E "^BM_" | sed -E 's/ +/ /g' >>$log
done
# The tensor-core products (mcd.comp at 8 tokens, mc.comp at 512), main against the patches.
f2='BM_Product/type:1[24]/K:(2560|10240)/N:(2560|10240)/T:(8|512)/barrier:1/form:2'
for v in main try; do
  bin=.gl/vk_kernel_bench; [[ $v == main ]] && bin=.gl/vk_kernel_bench-base
  echo "== $v" >>$log
  timeout 120 $bin --benchmark_filter="$f2" 2>&1 | grep -E "^BM_" | sed -E 's/ +/ /g' >>$log
done
python3 .gl/sweep-table $log
BENCH_QUICK=1 BENCH_REPEATS=2 BENCH_TIMEOUT=150 bash .gl/device-ab.sh "2.9b:q4_k_m 1.5b:q4_k_m 0.1b:q4_k_m" \
  "main=.gl/rwkvd-base slots=.gl/rwkvd,RWKVD_VK_PREFETCH=0 both=.gl/rwkvd both2=.gl/rwkvd,RWKVD_VK_PREFETCH=2 both_g132=.gl/rwkvd,RWKVD_VK_PREFETCH_GROUPS=132" 2
# What wkv's LoRA up phase's weight loads cost in the forward (RWKVD_VK_WKV_DIAG=l: the phase
# without them; wrong outputs, so only the timings count): 24% of 2.9B's profiled step is wkv, and
# its phase-L lanes moved gen-1 by 17% (session 25's knob call).
BENCH_QUICK=1 BENCH_REPEATS=2 BENCH_TIMEOUT=150 bash .gl/device-ab.sh "2.9b:q4_k_m 0.1b:q4_k_m" \
  "main=.gl/rwkvd-base noloads=.gl/rwkvd-base,RWKVD_VK_WKV_DIAG=l" 1
