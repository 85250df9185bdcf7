#!/usr/bin/env bash
# The per-kernel GPU time of `rwkvd bench` on the GPU host, from a bundle (scripts/bench-bundle):
#   bash BUNDLE/profile.sh "MODELS" "VARIANTS" [REPEATS]
# MODELS: preset:type words (e.g. "2.9b:q4_k_m 0.1b:q4_k_m"). VARIANTS: name=SETTING,SETTING words
# (settings as apply_variant in env.sh takes them: e.g. "new=mv_max_t=32 old=mv_max_t=0";
# "base=" for no change;
# RWKVD_VK_PROFILE=0 in a variant turns the profiler off, to see its cost; RWKVD_BIN=PATH runs
# another build, e.g. the last commit's, for an A/B of code rather than knobs). For each
# model and variant, `rwkvd bench --parts engine` runs with RWKVD_VK_PROFILE, so
# $OUT/profile.tar.gz gets the engine figures (JSON, markdown) and the per-kernel GPU time table of every variant.
set -uo pipefail
models=${1:-"0.1b:q4_k_m"}
variants=${2:-"base="}
repeats=${3:-2}
# shellcheck source-path=SCRIPTDIR source=env.sh
source "$(dirname "$0")/env.sh"
res=/tmp/profile
mkdir -p "$res"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$res/gpu.csv" 2>&1
for mt in $models; do
  p=${mt%%:*} t=${mt##*:}
  synth_model "$p" "$t" "$res"
  m=$model
  for v in $variants; do
    name=${v%%=*} envs=${v#*=}
    tag=$p-$t-$name
    (
      apply_variant "$tag" "$envs"
      RWKVD_VK_PROFILE=${RWKVD_VK_PROFILE-$res/kernels-$tag.md} timeout "${BENCH_TIMEOUT:-300}" "${RWKVD_BIN:-$bundle/rwkvd}" bench \
        --model "$m" --device gpu --parts engine --repeats "$repeats" --embed-docs "${EMBED_DOCS:-64}" \
        --text "$bundle/bench_email.txt" \
        --out "$res/engine-$tag.json" --markdown "$res/engine-$tag.md" >"$res/engine-$tag.log" 2>&1
    )
    echo "== $tag ($envs)"
    grep -E "gen\.|prefill\.|load\.|doc_state|embed.email" "$res/engine-$tag.md" | head -20
    tar czf "$OUT/profile.tar.gz" -C /tmp profile  # after each run: a run cut short keeps it
  done
done
