#!/usr/bin/env bash
# Session 25's first call. Why do mvq.comp's Q4_K / Q6_K products stream at ~1.5 TB/s when
# mvf.comp's F16 head streams at ~3.0? Diagnostic builds (RWKVD_VK_MVQ_DIAG: a = the loads alone,
# b = the nibbles alone, no headers) and the existing knobs at the uncapped grid; then the
# prepared capped-grid sweep (session 24's rows-in-flight/next-call.sh, kernels only).
# Prepare: scripts/bench-device; strip -o .gl/vk_kernel_bench build/bench/vk_kernel_bench;
# cp -L /usr/lib/x86_64-linux-gnu/libbenchmark.so.1debian .gl/lib/; cp this .gl/call1.sh
# Device run, carry [".gl"]: bash .gl/call1.sh
set -uo pipefail
table() {
  python3 - "$1" <<'PY'
import re, sys, collections
cur = None; t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"== (\S+)", line)
    if m: cur = m.group(1); continue
    m = re.match(r"(BM_\S+?)/iterations.*GB/s=([0-9.k]+).*us=([0-9.]+)", line)
    if m: t[(m.group(1), cur)].append(float(m.group(3)))
for n in sorted({k[0] for k in t}):
    print(n, " ".join("%s=%s" % (v, t[(n, v)][0]) for v in dict.fromkeys(k[1] for k in t if k[0] == n)))
PY
}
f='BM_Product/type:1[24]/K:(2560|10240)/N:(2560|10240|65536)/T:1/barrier:1/form:1'
v="base= diag_a=RWKVD_VK_MVQ_DIAG=a diag_b=RWKVD_VK_MVQ_DIAG=b"
v+=" p1=RWKVD_VK_MVQ_PIECES=1 p4=RWKVD_VK_MVQ_PIECES=4 r2=RWKVD_VK_MV_ROWS=2 r4=RWKVD_VK_MV_ROWS=4"
v+=" wg128=RWKVD_VK_MVQ_WG=128 wg256=RWKVD_VK_MVQ_WG=256 diag_a_p4=RWKVD_VK_MVQ_DIAG=a,RWKVD_VK_MVQ_PIECES=4"
v+=" diag_b_r4=RWKVD_VK_MVQ_DIAG=b,RWKVD_VK_MV_ROWS=4"
bash .gl/device-kernel-sweep.sh "$f" "$v" >/dev/null
mv $OUT/kernel-sweep.log $OUT/kernel-sweep-streaming.log
echo "== streaming (us)"; table $OUT/kernel-sweep-streaming.log
# The float products beside them (mvf.comp), for the rate mvq.comp is compared with.
bash .gl/device-kernel-sweep.sh 'BM_Product/type:1/K:(2560|10240)/N:(2560|10240|65536)/T:1/barrier:1/form:0' "base=" >/dev/null
mv $OUT/kernel-sweep.log $OUT/kernel-sweep-f16.log
echo "== f16 (us)"; table $OUT/kernel-sweep-f16.log
# Session 24's prepared capped-grid sweep, kernels only.
f='BM_Product/type:1[24]/K:(768|3072|2560|10240)/N:(768|3072|2560|10240)/T:1/barrier:1/form:1'
v="base= c264=RWKVD_VK_MAX_ROW_GROUPS=264"
for c in 264 132; do for r in 2 4; do for w in 64 128 256; do
  v+=" c${c}r${r}w${w}=RWKVD_VK_MAX_ROW_GROUPS=$c,RWKVD_VK_MV_ROWS=$r,RWKVD_VK_MVQ_WG=$w"
done; done; done
bash .gl/device-kernel-sweep.sh "$f" "$v" >/dev/null
mv $OUT/kernel-sweep.log $OUT/kernel-sweep-capped.log
echo "== capped (us)"; table $OUT/kernel-sweep-capped.log
