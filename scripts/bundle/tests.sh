#!/usr/bin/env bash
# The Vulkan tests on the GPU host, from a bundle made by `scripts/bench-bundle --tests`:
#   bash BUNDLE/tests.sh ["SUITES"]
# runs them against the fixtures packed in BUNDLE/fixtures.tar.xz (unpacked to BUNDLE/fixtures):
# the kernels lavapipe cannot run (tensor cores, the transfer queue) are tested
# here. SUITES: every suite of vk_tests unless named. One process per suite: the NVIDIA driver
# refuses new instances after about 30 in one process. No validation layer there. Logs in
# $OUT/vk_tests-logs.tgz (one archive; $OUT defaults to ./bench-out); prints each suite's exit status
# and the summary lines.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
source "$(dirname "$0")/env.sh"
[[ -f $bundle/fixtures.tar.xz && ! -d $bundle/fixtures ]] && tar xJf "$bundle/fixtures.tar.xz" -C "$bundle"
suites=${1:-$("$bundle/vk_tests" --gtest_list_tests | grep -E '^[A-Za-z0-9_/]+\.$' | tr -d '.' | tr '\n' ' ')}
logs=/tmp/vk_tests_logs && rm -rf $logs && mkdir -p $logs
for suite in $suites; do
  RWKVD_VK_VALIDATION=0 RWKVD_FIXTURES=$bundle/fixtures RWKVD_REQUIRE_FIXTURES=1 timeout 300 \
    "$bundle/vk_tests" --gtest_filter="$suite.*" >"$logs/vk_tests-${suite//\//_}.log" 2>&1
  echo "$suite rc=$?"
done
tar czf "$OUT/vk_tests-logs.tgz" -C /tmp vk_tests_logs
grep -hE "coopmat|FAILED|PASSED|synthetic-A.*logits|\[ tuning" "$logs"/vk_tests-*.log | sort | uniq -c
