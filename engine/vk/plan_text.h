#pragma once
// A forward plan as text, for people (`rwkvd inspect --plan`) and golden tables
// (tests/vk/golden/forward_plans.txt): each segment's dispatches one a line, in order.
#include <string>

#include "engine/vk/forward_plan.h"

namespace rwkvd::engine::vk {

// One line a dispatch: the step's label, its pipeline{specialization constants} and grid, and
// for products the form of their inputs ("in=int8"), the output forms they also write
// ("+int8", "+fp16", "fp16 only") and "shift in front"; a barrier is "--" (compute) or "== full"
// / "== host". Each line starts with `indent`.
std::string segment_text(const ForwardPlanner& planner, uint32_t segment, const ForwardShape& s,
                         const std::string& indent = "  ");

// Every segment, headed "embedding", "layer l" and "head"; layers whose text equals the
// previous layer's are folded into one line ("layers 2-31: as layer 1").
std::string plan_text(const ForwardPlanner& planner, const ForwardShape& s);

}  // namespace rwkvd::engine::vk
