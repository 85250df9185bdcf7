#include "engine/vk/plan_text.h"

#include <vector>

#include "engine/vk/step_recorder.h"

namespace rwkvd::engine::vk {
namespace {

std::string key_text(const Pipelines::Key& k) {
  std::string out = k.first + "{";
  for (size_t i = 0; i < k.second.size(); ++i) out += (i ? "," : "") + std::to_string(k.second[i]);
  return out + "}";
}

// What a product step reads and writes besides its floats.
std::string forms_text(const step::Products& p) {
  std::string out = std::string(" in=") + mm_input_name(p.plan.input);
  if (p.plan.writes_q8) out += " +int8";
  if (p.plan.writes_h16) out += p.slots[0].y_half_only ? " fp16 only" : " +fp16";
  if (p.plan.shift_in_front) out += " shift in front";
  return out;
}

std::string barrier_text(const Step& s) {
  const auto* b = std::get_if<step::Barrier>(&s.op);
  if (b != nullptr && *b == step::Barrier::kFull) return "== full";
  if (b != nullptr && *b == step::Barrier::kHost) return "== host";
  return "--";
}

}  // namespace

std::string segment_text(const ForwardPlanner& planner, uint32_t segment, const ForwardShape& s,
                         const std::string& indent) {
  const std::vector<Step> steps = planner.segment(segment, s);
  std::string out;
  for (const PlannedDispatch& d : planned_dispatches(planner.kernels(), steps)) {
    const Step& st = steps[d.step];
    out += indent;
    if (d.dispatch.key.first.empty()) {
      out += barrier_text(st) + "\n";
      continue;
    }
    if (std::holds_alternative<step::CopyOut>(st.op)) {
      out += st.label + ": " + std::to_string(d.dispatch.x) + " regions\n";
      continue;
    }
    out += st.label + ": " + key_text(d.dispatch.key) + " " + std::to_string(d.dispatch.x) + "," +
           std::to_string(d.dispatch.y) + "," + std::to_string(d.dispatch.z);
    if (const auto* p = std::get_if<step::Products>(&st.op); p && d.dispatch.key == p->plan.key) {
      out += forms_text(*p);
    }
    out += "\n";
  }
  return out;
}

std::string plan_text(const ForwardPlanner& planner, const ForwardShape& s) {
  const uint32_t last = planner.n_segments() - 1;
  std::string out = "embedding\n" + segment_text(planner, 0, s);
  std::string previous;
  uint32_t same_from = 0;  // first layer of a run equal to the one before it (0: none)
  const auto close_run = [&](uint32_t until) {
    if (same_from == 0) return;
    out += same_from == until ? "layer " + std::to_string(until)
                              : "layers " + std::to_string(same_from) + "-" + std::to_string(until);
    out += ": as layer " + std::to_string(same_from - 1) + "\n";
    same_from = 0;
  };
  for (uint32_t l = 0; l + 1 < last; ++l) {
    std::string text = segment_text(planner, l + 1, s);
    if (l > 0 && text == previous) {
      if (same_from == 0) same_from = l;
      continue;
    }
    close_run(l - 1);
    out += "layer " + std::to_string(l) + "\n" + text;
    previous = std::move(text);
  }
  close_run(last - 2);
  return out + "head\n" + segment_text(planner, last, s);
}

}  // namespace rwkvd::engine::vk
