#!/usr/bin/env bash
# Kernel timings on the GPU host, from a bundle made by `scripts/bench-bundle --tests`:
#   bash BUNDLE/kernel-sweep.sh "FILTER" "VARIANTS"
# vk_kernel_bench once per variant (name=SETTING,SETTING words, "base=" for none; settings as
# apply_variant in env.sh takes them, and --diag=NAME for a diagnostic build; e.g.
# "base= r128=mc_rows=128 noA=--diag=wkv_long_a"), the products that FILTER (a --benchmark_filter
# regex, e.g. 'BM_Product/type:12/.*/T:512/') selects. Prints one line per product and variant
# (us, TFLOP/s) and appends the raw lines to $OUT/kernel-sweep.log. A knob sweep costs seconds per
# variant, so many fit one run (nine mc.comp tile shapes take about a minute). `python3
# BUNDLE/sweep-table $OUT/kernel-sweep.log` prints one line per product with every variant's time.
set -uo pipefail
filter=${1:-'BM_Product/.*/T:512/'}
variants=${2:-"base="}
# shellcheck source-path=SCRIPTDIR source=env.sh
source "$(dirname "$0")/env.sh"
for v in $variants; do
  name=${v%%=*} envs=${v#*=}
  echo "== $name ($envs)" | tee -a "$OUT/kernel-sweep.log"
  (
    diag=()
    [[ $envs == *--diag=* ]] && diag=("--diag=$(sed -E 's/.*--diag=([a-z_]+).*/\1/' <<<"$envs")")
    apply_variant "$name" "$(sed -E 's/(^|,)--diag=[a-z_]+//' <<<"$envs")"
    timeout "${SWEEP_TIMEOUT:-120}" "$bundle/vk_kernel_bench" "${diag[@]}" --benchmark_filter="$filter" 2>&1
  ) | grep -E "^device|^BM_" | sed -E 's/ +/ /g' | tee -a "$OUT/kernel-sweep.log" |
    grep -oE "^BM_[^ ]+|us=[0-9.]+|TFLOP/s=[0-9.]+" | paste -sd' ' | sed 's/ BM_/\nBM_/g'
done
