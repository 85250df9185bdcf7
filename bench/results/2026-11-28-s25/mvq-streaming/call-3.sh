#!/usr/bin/env bash
# Session 25's third call: is mvq.comp bound by its inputs' loads? Diagnostic builds: a = the
# weights' loads alone, c = and the inputs' loads as the product makes them (two runs 32 bytes
# apart and two (d, s) pairs a piece), d = the same bytes laid out piece after piece (three
# 16-byte loads a piece, neighbouring lanes neighbouring words). Device run: bash .gl/call3.sh
set -uo pipefail
source .gl/table.sh
f='BM_Product/type:1[24]/K:(2560|10240)/N:(2560|10240|65536)/T:1/barrier:1/form:1'
v="base=RWKVD_VK_MVQ_PAIRS=0 pairs= a=RWKVD_VK_MVQ_DIAG=a c=RWKVD_VK_MVQ_DIAG=c d=RWKVD_VK_MVQ_DIAG=d"
v+=" c_r2=RWKVD_VK_MVQ_DIAG=c,RWKVD_VK_MV_ROWS=2 d_r2=RWKVD_VK_MVQ_DIAG=d,RWKVD_VK_MV_ROWS=2"
v+=" base_r2=RWKVD_VK_MVQ_PAIRS=0,RWKVD_VK_MV_ROWS=2"
bash .gl/device-kernel-sweep.sh "$f" "$v" >/dev/null
mv $OUT/kernel-sweep.log $OUT/kernel-sweep-inputs.log
echo "== inputs (us)"; table $OUT/kernel-sweep-inputs.log
