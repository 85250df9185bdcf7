#!/usr/bin/env bash
# Runs ON the device machine from the repo root (prepare with `scripts/bench-device --tests`):
#   bash .gl/device-tests.sh ["SUITES"]
# The Vulkan tests on the GPU, against the fixtures carried in .gl/fixtures.tar.xz (unpacked to
# .gl/fixtures): the kernels lavapipe cannot run (tensor cores, the transfer queue) are tested
# here. SUITES: every suite of vk_tests unless named. One process per suite: the NVIDIA driver
# refuses new instances after about 30 in one process. No validation layer there. Logs in
# $OUT/vk_tests-logs.tgz (one file: $OUT brings back at most 8); prints each suite's exit status
# and the summary lines.
set -uo pipefail
source .gl/device-env.sh
[[ -f .gl/fixtures.tar.xz && ! -d .gl/fixtures ]] && tar xJf .gl/fixtures.tar.xz -C .gl
suites=${1:-$(.gl/vk_tests --gtest_list_tests | grep -E '^[A-Za-z0-9_/]+\.$' | tr -d '.' | tr '\n' ' ')}
logs=/tmp/vk_tests_logs && rm -rf $logs && mkdir -p $logs
for suite in $suites; do
  RWKVD_VK_VALIDATION=0 RWKVD_FIXTURES=$PWD/.gl/fixtures RWKVD_REQUIRE_FIXTURES=1 timeout 300 \
    .gl/vk_tests --gtest_filter="$suite.*" >"$logs/vk_tests-${suite//\//_}.log" 2>&1
  echo "$suite rc=$?"
done
tar czf "$OUT/vk_tests-logs.tgz" -C /tmp vk_tests_logs
grep -hE "coopmat|FAILED|PASSED|synthetic-A.*logits|\[ tuning" "$logs"/vk_tests-*.log | sort | uniq -c
