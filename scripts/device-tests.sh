#!/usr/bin/env bash
# Runs ON the device machine from the repo root (prepare with `scripts/bench-device --tests`):
#   bash .gl/device-tests.sh ["SUITES"]
# The Vulkan tests on the GPU, against the fixtures carried in .gl/fixtures: the kernels lavapipe
# cannot run (tensor cores, the transfer queue) are tested here. One process per suite: the
# NVIDIA driver refuses new instances after about 30 in one process. No validation layer there.
# Logs in $OUT/vk_tests-SUITE.log; prints each suite's exit status and the summary lines.
set -uo pipefail
suites=${1:-"VkForward VkPipelineCache VkRowKernels VkUpload VkDevice VkWkv EveryType/VkMatmul"}
source .gl/device-env.sh
for suite in $suites; do
  RWKVD_VK_VALIDATION=0 RWKVD_FIXTURES=$PWD/.gl/fixtures RWKVD_REQUIRE_FIXTURES=1 timeout 300 \
    .gl/vk_tests --gtest_filter="$suite.*" >"$OUT/vk_tests-${suite//\//_}.log" 2>&1
  echo "$suite rc=$?"
done
grep -hE "coopmat|FAILED|PASSED|synthetic-A.*logits" "$OUT"/vk_tests-*.log | sort | uniq -c
