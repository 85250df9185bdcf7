#include "engine/vk/kernels.h"

#include <algorithm>
#include <cctype>

#include "engine/error.h"

namespace rwkvd::engine::vk {
namespace {

constexpr uint32_t kTokenTile = 8;  // mm.comp TT: tokens per workgroup

struct MmPush {
  uint32_t K[4], N[4], x_off[4], y_off[4], mode[4], row_bytes[4];
  uint32_t T;
};
static_assert(sizeof(MmPush) <= kPushConstantBytes);
static_assert(sizeof(ShiftArgs) <= kPushConstantBytes);
static_assert(sizeof(WkvArgs) <= kPushConstantBytes);
static_assert(sizeof(OutLnArgs) <= kPushConstantBytes);

uint32_t ceil_div(uint32_t a, uint32_t b) {
  return (a + b - 1) / b;
}

}  // namespace

std::string weight_type_suffix(GgmlType t) {
  std::string s(ggml_traits(t).name);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Kernels::Kernels(Device& dev, Pipelines& pipes) : dev_(dev), pipes_(pipes) {
  wg_ = std::min<uint32_t>(64, dev.props().limits.maxComputeWorkGroupSize[0]);
  // A CPU implementation (lavapipe) pays per workgroup: let each loop over many rows.
  if (dev.props().deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) {
    wg_ = 16;
    max_row_groups_ = 4;
  }
}

void Kernels::warm(std::span<const GgmlType> types, uint32_t head_size) {
  const std::string sg = dev_.features().subgroup_arith ? "_sg" : "";
  for (GgmlType t : types) {
    pipes_.get("mm_" + weight_type_suffix(t) + sg, {wg_, kTokenTile});
    pipes_.get("embed_" + weight_type_suffix(t), {wg_});
  }
  pipes_.get("shift", {wg_});
  pipes_.get("out_ln", {wg_});
  pipes_.get("wkv", {head_size, head_size});
}

void Kernels::bind(VkCommandBuffer cb, VkDescriptorSet set, VkPipeline p, const void* pc,
                   uint32_t size) {
  vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p);
  vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipes_.layout(), 0, 1, &set, 0,
                          nullptr);
  vkCmdPushConstants(cb, pipes_.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, size, pc);
  ++dispatches_;
}

void Kernels::mm(VkCommandBuffer cb, VkDescriptorSet set, GgmlType type,
                 std::span<const MmSlot> slots, uint32_t T) {
  if (slots.empty() || slots.size() > kWeightBindings || T == 0) {
    throw EngineError("vk mm: 1..4 slots and T > 0 required");
  }
  MmPush pc{};
  uint32_t max_n = 0;
  for (size_t i = 0; i < slots.size(); ++i) {
    const MmSlot& s = slots[i];
    if (s.K % 8 != 0) throw EngineError("vk mm: K must be a multiple of 8");
    pc.K[i] = s.K;
    pc.N[i] = s.N;
    pc.x_off[i] = s.x_off;
    pc.y_off[i] = s.y_off;
    pc.mode[i] = static_cast<uint32_t>(s.mode);
    pc.row_bytes[i] = s.row_bytes;
    max_n = std::max(max_n, s.N);
  }
  pc.T = T;
  const std::string sg = dev_.features().subgroup_arith ? "_sg" : "";
  bind(cb, set, pipes_.get("mm_" + weight_type_suffix(type) + sg, {wg_, kTokenTile}), &pc,
       sizeof(pc));
  // Rows per workgroup: one per subgroup, or one (workgroup reduction).
  const uint32_t rows =
      dev_.features().subgroup_arith ? std::max(1u, wg_ / dev_.features().subgroup_size) : 1u;
  const uint32_t gx = std::min({(max_n + rows - 1) / rows,
                                dev_.props().limits.maxComputeWorkGroupCount[0], max_row_groups_});
  vkCmdDispatch(cb, gx, ceil_div(T, kTokenTile), static_cast<uint32_t>(slots.size()));
}

void Kernels::embed(VkCommandBuffer cb, VkDescriptorSet set, GgmlType type, const EmbedArgs& a,
                    uint32_t T) {
  bind(cb, set, pipes_.get("embed_" + weight_type_suffix(type), {wg_}), &a, sizeof(a));
  vkCmdDispatch(cb, T, 1, 1);
}

void Kernels::shift(VkCommandBuffer cb, VkDescriptorSet set, const ShiftArgs& a, uint32_t T) {
  bind(cb, set, pipes_.get("shift", {wg_}), &a, sizeof(a));
  vkCmdDispatch(cb, T, 1, 1);
}

void Kernels::wkv(VkCommandBuffer cb, VkDescriptorSet set, const WkvArgs& a, uint32_t n_head,
                  uint32_t head_size, uint32_t n_seq) {
  if (head_size > 256 || (head_size & (head_size - 1)) != 0) {
    throw EngineError("vk wkv: head size must be a power of two <= 256");
  }
  bind(cb, set, pipes_.get("wkv", {head_size, head_size}), &a, sizeof(a));
  vkCmdDispatch(cb, n_head, n_seq, 1);
}

void Kernels::out_ln(VkCommandBuffer cb, VkDescriptorSet set, const OutLnArgs& a) {
  bind(cb, set, pipes_.get("out_ln", {wg_}), &a, sizeof(a));
  vkCmdDispatch(cb, std::max(a.n_out, a.n_seq), 1, 1);
}

void Kernels::barrier(VkCommandBuffer cb) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                     VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1,
                       &mb, 0, nullptr, 0, nullptr);
}

}  // namespace rwkvd::engine::vk
