#!/usr/bin/env bash
# Session 25's eighth call: with mvq.comp's cheaper scales (0cef7ed), do 2.9B's shifts pay in
# front of their products now (session 21: the ffn shift alone -7%, both even)?
set -uo pipefail
BENCH_QUICK=1 BENCH_REPEATS=2 BENCH_TIMEOUT=150 bash .gl/device-ab.sh "2.9b:q4_k_m" \
  "now=.gl/rwkvd ffn=.gl/rwkvd,RWKVD_VK_FFN_SHIFT_IN_FRONT_MAX_K=2560 att=.gl/rwkvd,RWKVD_VK_ATT_SHIFT_IN_FRONT_MAX_K=2560 both=.gl/rwkvd,RWKVD_VK_FFN_SHIFT_IN_FRONT_MAX_K=2560,RWKVD_VK_ATT_SHIFT_IN_FRONT_MAX_K=2560" 2
