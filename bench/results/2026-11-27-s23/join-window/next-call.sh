#!/usr/bin/env bash
# The join window's round (1a1d97a) against the scheduler before it, at the client:
# 2.9B Q4_K_M, `rwkvd bench --parts client`, two rounds alternating. Prepare with
# `scripts/bench-device` (.gl/rwkvd: the new scheduler) and a binary of c418573 as
# .gl/rwkvd-prejoin. Device run, carry [".gl"]: bash .gl/join-ab.sh
set -uo pipefail
source .gl/device-env.sh
mkdir -p /tmp/j
synth_model 2.9b q4_k_m /tmp/j
for r in 1 2; do
  for v in prejoin=.gl/rwkvd-prejoin new=.gl/rwkvd; do
    name=${v%%=*} bin=${v#*=}
    timeout 240 "$bin" bench --model "$model" --device gpu --parts client --repeats 2 \
      --text .gl/bench_email.txt --fields .gl/field_prompts.txt --embed-docs 16 \
      --out /tmp/j/$name-$r.json --markdown /tmp/j/$name-$r.md >/tmp/j/$name-$r.log 2>&1
    echo "== $name round $r rc=$?"
    grep -E "field_analysis|doc_state.client_ms" /tmp/j/$name-$r.md
    python3 -c "import json, sys; c = json.load(open(sys.argv[1]))['client']; \
print('steps', json.dumps(c['field_step_histograms']['shared_clients']['le']), \
'timeline', [[round(x, 1) for x in t] for t in c['field_shared_timeline_ms']])" /tmp/j/$name-$r.json
  done
  tar czf "$OUT/join.tgz" -C /tmp j
done
