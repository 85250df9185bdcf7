#!/usr/bin/env bash
# Session 23: the 2.9B F16 gen-1 regression, one call: binaries and knobs alternating, then the
# pipelines' statistics of mvf_f16 in the fast and the slow binary.
set -uo pipefail
BENCH_QUICK=1 BENCH_REPEATS=2 BENCH_TIMEOUT=150 bash .gl/device-ab.sh "2.9b:f16" \
  "old=.gl/rwkvd-1028261 b703=.gl/rwkvd-703e454 mvfold=.gl/rwkvd-mvfold meta1=.gl/rwkvd-meta1 oldm2=.gl/rwkvd-old-meta2 head=.gl/rwkvd headnd=.gl/rwkvd,RWKVD_VK_DEDICATED=0 headmh=.gl/rwkvd,RWKVD_VK_META_HOST=1" 2
source .gl/device-env.sh
synth_model 2.9b f16 /tmp
for b in rwkvd-1028261 rwkvd-703e454 rwkvd; do
  RWKVD_VK_PIPELINE_STATS=1 RWKVD_VK_PIPELINE_CACHE=0 timeout 120 .gl/$b eval --model "$model" --device gpu --tokens 11,22,33 --chunk 1 --out /tmp/x.bin >/tmp/ps-$b.log 2>&1
  echo "== $b"; grep -i "mvf" /tmp/ps-$b.log | head -12
done
