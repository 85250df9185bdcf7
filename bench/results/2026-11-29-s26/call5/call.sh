#!/usr/bin/env bash
# Session 26, call 5: main against the session's three commits (mcd.comp's chunk branch, Q6_K
# device rows, Q6_K heads of <= 8 rows on the int8 kernel), three rounds; a Q6_K file too.
set -uo pipefail
BENCH_QUICK=1 BENCH_REPEATS=2 BENCH_TIMEOUT=150 bash .gl/device-ab.sh "2.9b:q4_k_m 0.1b:q4_k_m 1.5b:q4_k_m 2.9b:q6_k" \
  "main=.gl/rwkvd-base new=.gl/rwkvd" 3
