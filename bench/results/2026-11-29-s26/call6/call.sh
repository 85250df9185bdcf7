#!/usr/bin/env bash
# Session 26, call 6: the Q6_K rows at an odd stride, main against the session's head.
set -uo pipefail
BENCH_QUICK=1 BENCH_REPEATS=2 BENCH_TIMEOUT=150 bash .gl/device-ab.sh "2.9b:q6_k 0.1b:q4_k_m" \
  "main=.gl/rwkvd-base new=.gl/rwkvd" 2
