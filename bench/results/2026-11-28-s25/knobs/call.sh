#!/usr/bin/env bash
# Session 25's last call: knobs whose kernel figures moved with 0cef7ed's scales, end to end:
# three pieces a lane (Q6_K head 91.9 -> 85.4 us alone), wkv's phase-L lanes, 128-invocation
# mvq workgroups (0.1B's 768 -> 3072 4.30 -> 4.00 us alone).
set -uo pipefail
BENCH_QUICK=1 BENCH_REPEATS=2 BENCH_TIMEOUT=150 bash .gl/device-ab.sh "2.9b:q4_k_m 0.1b:q4_k_m" \
  "now=.gl/rwkvd p3=.gl/rwkvd,RWKVD_VK_MVQ_PIECES=3 wl16=.gl/rwkvd,RWKVD_VK_WKV_LANES=16 wl4=.gl/rwkvd,RWKVD_VK_WKV_LANES=4 wg128=.gl/rwkvd,RWKVD_VK_MVQ_WG=128" 2
