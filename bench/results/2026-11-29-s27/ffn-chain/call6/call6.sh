#!/usr/bin/env bash
# Session 27: the ffn chain (one dispatch for one token's ffn key and value, a device-wide wait
# between): bit-identity against separate dispatches, then an A/B.
set -uo pipefail
source .gl/device-env.sh
res=/tmp/chain; mkdir -p $res
.gl/rwkvd synth --layers 2 --embd 512 --type q4_k_m --seed 3 --out /tmp/tiny.gguf >/dev/null 2>&1
synth_model 0.1b q4_k_m $res; m01=$model
toks=$(seq -s, 100 37 1300)
ev() { local m=$1 out=$2; shift 2; env "$@" timeout 60 .gl/rwkvd eval --model $m --tokens $toks --what logits --positions all --chunk 1 --device gpu --out $out >$out.log 2>&1; echo "rc=$?"; }
for m in /tmp/tiny.gguf $m01; do
  n=$(basename $m .gguf)
  ev $m $res/$n-off.bin X=1
  for cfg in "RWKVD_VK_FFN_CHAIN=132" "RWKVD_VK_FFN_CHAIN=264" "RWKVD_VK_FFN_CHAIN=264 RWKVD_VK_FFN_SHIFT_IN_FRONT_MAX_K=0"; do
    t=$(echo $cfg | tr ' =' '_-')
    r=$(ev $m $res/$n-$t.bin $cfg)
    ref=$res/$n-off.bin
    [[ $cfg == *MAX_K* ]] && { [[ -f $res/$n-nofront.bin ]] || ev $m $res/$n-nofront.bin RWKVD_VK_FFN_SHIFT_IN_FRONT_MAX_K=0 >/dev/null; ref=$res/$n-nofront.bin; }
    cmp -s $ref $res/$n-$t.bin && echo "$n $cfg $r SAME" || echo "$n $cfg $r DIFF"
  done
done
BENCH_QUICK=1 BENCH_REPEATS=1 BENCH_TIMEOUT=120 bash .gl/device-ab.sh "0.1b:q4_k_m 1.5b:q4_k_m 2.9b:q4_k_m" \
  "base=.gl/rwkvd-base c132=.gl/rwkvd,RWKVD_VK_FFN_CHAIN=132 c264=.gl/rwkvd,RWKVD_VK_FFN_CHAIN=264 c264np=.gl/rwkvd,RWKVD_VK_FFN_CHAIN=264,RWKVD_VK_FFN_CHAIN_PREFETCH=0" 2
