#!/usr/bin/env bash
# Session 27's first call: where session 26's results call stalled. Its binary (branch
# experiment/s26-q6k-rows, 8576dcc: Q6_K device rows, Q6_K heads of <= 8 rows on the int8
# kernel) ran the full `rwkvd bench` of 2.9B Q4_K_M past device-run.sh's 400 s with no output
# (call7/), where every engine-only quick A/B of it had finished (call5/, call6/). This runs the
# full bench's two parts apart, for main and the branch, with timeouts, and keeps the workers'
# logs of a part that does not finish (the bench prints a line as each part starts, 7cb6f4d;
# the branch is rebased on it).
# Prepare (here): git checkout experiment/s26-q6k-rows && scripts/bench-device --base main
#   (then git checkout main); cp this .gl/next.sh
# Device run, carry [".gl"]: bash .gl/next.sh   (~4 minutes if nothing stalls)
set -uo pipefail
source .gl/device-env.sh
res=/tmp/stall
mkdir -p $res
synth_model 2.9b q4_k_m $res
for bin in .gl/rwkvd-base .gl/rwkvd; do
  for part in engine client; do
    tag=$(basename $bin)-$part
    rm -rf /tmp/rwkvd-bench-*
    start=$(date +%s)
    timeout -s KILL 150 $bin bench --model "$model" --device gpu --repeats 1 --parts $part \
      --text .gl/bench_email.txt --fields .gl/field_prompts.txt --embed-docs 128 \
      --out $res/$tag.json --markdown $res/$tag.md >$res/$tag.log 2>&1
    echo "== $tag rc=$? $(( $(date +%s) - start )) s"
    tail -3 $res/$tag.log
    for d in /tmp/rwkvd-bench-*; do [[ -d $d ]] && cp -r "$d" "$res/$tag-workers" && tail -20 "$d"/worker-*.log; done
  done
done
tar czf "$OUT/stall.tar.gz" -C /tmp stall
