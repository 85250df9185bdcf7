#!/usr/bin/env bash
# An A/B of builds or settings on the GPU host, from a bundle (scripts/bench-bundle, --base REV
# for an A/B of code):
#   bash BUNDLE/ab.sh "MODELS" "VARIANTS" [ROUNDS]
# MODELS: preset:type words ("2.9b:q4_k_m 0.1b:q4_k_m"). VARIANTS: name=BINARY[,SETTING...] words,
# BINARY relative to where it runs ("base=BUNDLE/rwkvd-base new=BUNDLE/rwkvd" or
# "off=BUNDLE/rwkvd,fuse_lora=false on=BUNDLE/rwkvd"; settings as apply_variant in env.sh takes
# them: tuning values, or ENV=V). Runs
# `rwkvd bench --parts engine --repeats 1` (BENCH_REPEATS; BENCH_QUICK=1: --quick) of every
# variant in turn, ROUNDS times (default 3), so that drift of the machine falls on every variant
# alike (compare within a run only), with the profiler off. Prints a line per run (its key figures and quality hash: a change of numbers shows
# there) and packs every JSON and table into $OUT/ab.tgz after each round.
set -uo pipefail
models=${1:?models}
variants=${2:?variants}
rounds=${3:-3}
# shellcheck source-path=SCRIPTDIR source=env.sh
source "$(dirname "$0")/env.sh"
res=/tmp/ab
mkdir -p "$res"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$res/gpu.csv" 2>&1
for mt in $models; do synth_model "${mt%%:*}" "${mt##*:}" "$res"; done
for r in $(seq 1 "$rounds"); do
  for mt in $models; do
    p=${mt%%:*} t=${mt##*:}
    synth_model "$p" "$t" "$res"
    for v in $variants; do
      name=${v%%=*} spec=${v#*=}
      bin=${spec%%,*} envs=""
      [[ $spec == *,* ]] && envs=${spec#*,}
      tag=$p-$t-$name-$r
      (
        apply_variant "$tag" "$envs"
        timeout "${BENCH_TIMEOUT:-120}" "$bin" bench --model "$model" ${BENCH_QUICK:+--quick} \
          --device gpu --parts engine --repeats "${BENCH_REPEATS:-1}" --embed-docs "${EMBED_DOCS:-16}" \
          --text "$bundle/bench_email.txt" \
          --out "$res/$tag.json" --markdown "$res/$tag.md" >"$res/$tag.log" 2>&1
      )
      rc=$?
      hash=$(grep -o '"quality_hash": *"[0-9a-f]*"' "$res/$tag.json" 2>/dev/null | grep -o '[0-9a-f]\{16\}')
      figs=$(grep -E '^\| (prefill\.|gen\.|doc_state\.engine|embed\.email_engine|field_analysis\.engine|state\.|load\.(usable|resident))' "$res/$tag.md" 2>/dev/null |
        awk -F'|' '{gsub(/ /, "", $2); gsub(/ /, "", $3); printf "%s=%s ", $2, $3}')
      echo "$tag rc=$rc hash=${hash:-none} $figs"
    done
  done
  tar czf "$OUT/ab.tgz" -C /tmp ab  # after each round: a run cut short keeps what it finished
done
