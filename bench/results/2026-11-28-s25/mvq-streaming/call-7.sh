#!/usr/bin/env bash
# Session 25's seventh call: 2.9B Q4_K_M's decode profile with kscale_pair (0cef7ed); mvq.comp's
# knobs again now that its scales cost less; rows a subgroup end to end.
set -uo pipefail
source .gl/table.sh
f='BM_Product/type:1[24]/K:(768|3072|2560|10240)/N:(768|3072|2560|10240|65536)/T:1/barrier:1/form:1'
v="now= r2=RWKVD_VK_MV_ROWS=2 p1=RWKVD_VK_MVQ_PIECES=1 p3=RWKVD_VK_MVQ_PIECES=3 p4=RWKVD_VK_MVQ_PIECES=4 wg128=RWKVD_VK_MVQ_WG=128 a=RWKVD_VK_MVQ_DIAG=a c=RWKVD_VK_MVQ_DIAG=c e=RWKVD_VK_MVQ_DIAG=e"
bash .gl/device-kernel-sweep.sh "$f" "$v" >/dev/null
mv $OUT/kernel-sweep.log $OUT/kernel-sweep-knobs.log
echo "== knobs (us)"; table $OUT/kernel-sweep-knobs.log
bash .gl/device-profile.sh "2.9b:q4_k_m" "now=" 1 >/dev/null 2>&1
tar xzf $OUT/profile.tar.gz -C /tmp 2>/dev/null; ls /tmp/profile
head -40 /tmp/profile/kernels-2.9b-q4_k_m-now.md
BENCH_QUICK=1 BENCH_REPEATS=2 BENCH_TIMEOUT=150 bash .gl/device-ab.sh "2.9b:q4_k_m 0.1b:q4_k_m" \
  "now=.gl/rwkvd r2=.gl/rwkvd,RWKVD_VK_MV_ROWS=2" 2
