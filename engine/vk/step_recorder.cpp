#include "engine/vk/step_recorder.h"

#include <type_traits>

namespace rwkvd::engine::vk {

void record_step(Kernels& k, VkCommandBuffer cb, const Step& s, const StepTargets& t) {
  std::visit(
      [&](const auto& op) {
        using Op = std::decay_t<decltype(op)>;
        if constexpr (std::is_same_v<Op, step::Embed>) {
          k.embed(cb, t.set, op.type, op.args, op.T);
        } else if constexpr (std::is_same_v<Op, step::Shift>) {
          k.shift(cb, t.set, op.args, op.T);
        } else if constexpr (std::is_same_v<Op, step::ToHalf>) {
          k.to_half(cb, t.set, op.T, op.regions);
        } else if constexpr (std::is_same_v<Op, step::ToInt8>) {
          k.quantize_q8(cb, t.set, op.K, op.T, op.x_off, op.q_off);
        } else if constexpr (std::is_same_v<Op, step::Products>) {
          k.record_mm(cb, t.set, op.plan);
        } else if constexpr (std::is_same_v<Op, step::Wkv>) {
          k.wkv(cb, t.set, op.args, op.n_head, op.head_size, op.n_seq, op.T, op.longest);
        } else if constexpr (std::is_same_v<Op, step::OutLn>) {
          k.out_ln(cb, t.set, op.args);
        } else if constexpr (std::is_same_v<Op, step::Argmax>) {
          k.argmax(cb, t.set, op.n, op.rows, op.src, op.dst);
        } else if constexpr (std::is_same_v<Op, step::CopyOut>) {
          k.copy(cb, t.act, t.readback, std::span(op.regions.data(), op.n_regions));
        } else if constexpr (std::is_same_v<Op, step::Barrier>) {
          if (op == step::Barrier::kCompute) k.compute_barrier(cb);
          if (op == step::Barrier::kFull) k.full_barrier(cb);
          if (op == step::Barrier::kHost) k.host_barrier(cb);
        }
      },
      s.op);
}

std::vector<PlannedDispatch> planned_dispatches(const Kernels& kernels,
                                                std::span<const Step> steps) {
  Kernels k = kernels.plan_only();
  std::vector<PlannedDispatch> out;
  for (size_t i = 0; i < steps.size(); ++i) {
    const size_t before = k.dispatch_log().size();
    record_step(k, VK_NULL_HANDLE, steps[i], {});
    for (size_t j = before; j < k.dispatch_log().size(); ++j) {
      out.push_back({i, k.dispatch_log()[j]});
    }
  }
  return out;
}

}  // namespace rwkvd::engine::vk
