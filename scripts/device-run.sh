#!/usr/bin/env bash
# Runs ON the device machine from the repo root (see scripts/bench-device):
#   bash .gl/device-run.sh "PRESETS" "TYPES" [REPEATS]
set -uo pipefail
presets=${1:-"0.1b"}
types=${2:-"q4_k_m"}
repeats=${3:-3}
source .gl/device-env.sh
res=/tmp/results
mkdir -p $res /tmp/models /tmp/llama
have_llama=0
[[ -f .gl/llama-vulkan.tar.xz ]] && tar xJf .gl/llama-vulkan.tar.xz -C /tmp/llama && have_llama=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $res/gpu.csv 2>&1
for p in $presets; do
  for t in $types; do
    synth_model "$p" "$t" "$res"
    m=$model
    timeout "${BENCH_TIMEOUT:-400}" .gl/rwkvd bench --model "$m" --device gpu --repeats "$repeats" \
      --text .gl/bench_email.txt --fields .gl/field_prompts.txt --embed-docs "${EMBED_DOCS:-256}" \
      --out $res/rwkvd-$p-$t.json --markdown $res/rwkvd-$p-$t.md >$res/rwkvd-$p-$t.log 2>&1
    if [[ $have_llama == 1 ]]; then
      python3 .gl/llama_bench_rwkv7.py --lib-dir /tmp/llama --model "$m" --text .gl/bench_email.txt \
        --out $res/llama-$p-$t.json --require-dev Vulkan >$res/llama-$p-$t.log 2>&1
    else
      echo "no .gl/llama-vulkan.tar.xz: llama.cpp not run" >$res/llama-$p-$t.log
    fi
    tail -3 $res/rwkvd-$p-$t.log
    # Packed after every model, so a run cut short still brings back what it finished.
    tar czf "$OUT/results.tar.gz" -C /tmp results
  done
done
