#!/usr/bin/env bash
# Session 28's first call (prepared in session 27): the ffn chain (branch experiment/s27-ffn-chain)
# with the ffn shift in front for 2.9B too. At 2560 inputs the shift in front lost as a product's
# prologue (640 workgroups each making it, session 21); in the chain only its 264 resident
# workgroups make it, and the ffn loses two dispatch boundaries a layer instead of one.
# Prepare (here): git checkout experiment/s27-ffn-chain && scripts/bench-device --base main
#   (then git checkout main); cp this .gl/next.sh
# Device run, carry [".gl"]: bash .gl/next.sh   (~3 minutes)
set -uo pipefail
source .gl/device-env.sh
res=/tmp/chain; mkdir -p $res
synth_model 0.1b q4_k_m $res; m01=$model
toks=$(seq -s, 100 37 1300)
ev() { local m=$1 out=$2; shift 2; env "$@" timeout 60 .gl/rwkvd eval --model $m --tokens $toks --what logits --positions all --chunk 1 --device gpu --out $out >$out.log 2>&1; echo "rc=$?"; }
# Bit-identity of the chain with the shift in front at the longest rows it will see here.
ev $m01 $res/off.bin X=1
for cfg in "RWKVD_VK_FFN_CHAIN=264" "RWKVD_VK_FFN_CHAIN=264 RWKVD_VK_FFN_SHIFT_IN_FRONT_MAX_K=4096"; do
  r=$(ev $m01 $res/t.bin $cfg); cmp -s $res/off.bin $res/t.bin && echo "0.1b $cfg $r SAME" || echo "0.1b $cfg $r DIFF"
done
BENCH_QUICK=1 BENCH_REPEATS=1 BENCH_TIMEOUT=120 bash .gl/device-ab.sh "2.9b:q4_k_m 1.5b:q4_k_m" \
  "base=.gl/rwkvd-base c264=.gl/rwkvd,RWKVD_VK_FFN_CHAIN=264 c264f=.gl/rwkvd,RWKVD_VK_FFN_CHAIN=264,RWKVD_VK_FFN_SHIFT_IN_FRONT_MAX_K=4096" 3
