#!/usr/bin/env bash
# Session 25's first call: can a capped grid keep today's one-token products' speed when each
# warp keeps several rows' loads in flight? (Session 24: capped at 264 workgroups, 0.1B's Q4_K
# 768 -> 3072 took 4.86 -> 11.99 us with one row a subgroup.) mvq.comp already takes up to 4 rows
# a subgroup ($RWKVD_VK_MV_ROWS) and larger workgroups ($RWKVD_VK_MVQ_WG); both with the cap
# ($RWKVD_VK_MAX_ROW_GROUPS) price a persistent layer kernel's products without new code.
# Prepare: scripts/bench-device; strip -o .gl/vk_kernel_bench build/bench/vk_kernel_bench;
# cp -L /usr/lib/x86_64-linux-gnu/libbenchmark.so.1debian .gl/lib/; cp this .gl/rows.sh
# Device run, carry [".gl"]: bash .gl/rows.sh   (~30 s of kernels, then ~150 s end to end)
set -uo pipefail
f='BM_Product/type:1[24]/K:(768|3072|2560|10240)/N:(768|3072|2560|10240)/T:1/barrier:1/form:1'
v="base= c264=RWKVD_VK_MAX_ROW_GROUPS=264"
for c in 264 132; do
  for r in 2 4; do
    for w in 64 128 256; do
      v+=" c${c}r${r}w${w}=RWKVD_VK_MAX_ROW_GROUPS=$c,RWKVD_VK_MV_ROWS=$r,RWKVD_VK_MVQ_WG=$w"
    done
  done
done
bash .gl/device-kernel-sweep.sh "$f" "$v" >/dev/null
python3 - $OUT/kernel-sweep.log <<'PY'
import re, sys, collections
cur = None; t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"== (\S+)", line)
    if m: cur = m.group(1); continue
    m = re.match(r"(BM_\S+?)/iterations.*us=([0-9.]+)", line)
    if m: t[(m.group(1), cur)].append(float(m.group(2)))
for n in sorted({k[0] for k in t}):
    print(n, " ".join("%s=%s" % (v, t[(n, v)][0]) for v in dict.fromkeys(k[1] for k in t if k[0] == n)))
PY
# End to end, the best capped setting the sweep shows (edit before the call if another is
# wanted) against none: 0.1B and 2.9B gen-1.
BENCH_QUICK=1 BENCH_REPEATS=2 BENCH_TIMEOUT=150 bash .gl/device-ab.sh "0.1b:q4_k_m 2.9b:q4_k_m" \
  "base=.gl/rwkvd c264r4w256=.gl/rwkvd,RWKVD_VK_MAX_ROW_GROUPS=264,RWKVD_VK_MV_ROWS=4,RWKVD_VK_MVQ_WG=256" 2
# And 527fbca's F16 defaults on the smaller F16 models (session 24 A/B'd 2.9B only; the H200
# results calls of sessions 20 and 24 differ by +3.7% / +6.9% for 0.1B / 1.5B F16, not one call):
# the knobs give back the old defaults (4 words, one row) exactly.
BENCH_QUICK=1 BENCH_REPEATS=2 BENCH_TIMEOUT=150 bash .gl/device-ab.sh "0.1b:f16 1.5b:f16" \
  "old=.gl/rwkvd,RWKVD_VK_MVF_WORDS=4,RWKVD_VK_MVF_ROWS=1 new=.gl/rwkvd" 2
