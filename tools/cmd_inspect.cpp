// `rwkvd inspect FILE.gguf`: the metadata, the tensor table and the size per type; with --plan,
// the Vulkan forward's plan for a batch shape on this machine's device or a named profile.
#include <algorithm>
#include <cstdio>
#include <string>

#include "engine/error.h"
#include "engine/gguf.h"
#include "tools/commands.h"
#include "tools/model_summary.h"

#ifdef RWKVD_HAVE_VULKAN
#include "engine/model.h"
#include "engine/vk/context.h"
#include "engine/vk/forward_plan.h"
#include "engine/vk/plan_text.h"
#include "engine/vk/vk_backend.h"
#endif

namespace rwkvd::tools {
namespace {

std::string shape_of(const engine::GgufTensor& t) {
  std::string s = "[";
  for (uint32_t d = 0; d < t.n_dims; ++d) s += (d ? ", " : "") + std::to_string(t.ne[d]);
  return s + "]";
}

void run_inspect(const std::string& path) {
  auto f = engine::GgufFile::open(path);
  std::printf("file: %s\nGGUF v%u, %zu metadata keys, %zu tensors, alignment %u, data at %llu\n",
              path.c_str(), f->version(), f->metadata().size(), f->tensors().size(), f->alignment(),
              static_cast<unsigned long long>(f->data_offset()));
  std::printf("\nmetadata:\n");
  for (const auto& [key, value] : f->metadata()) {
    std::printf("  %-48s %-6s %s\n", std::string(key).c_str(),
                std::string(engine::gguf_value_type_name(value.type)).c_str(),
                engine::gguf_value_to_string(value).c_str());
  }
  std::printf("\ntensors:\n  %-44s %-8s %-24s %12s\n", "name", "type", "shape", "bytes");
  for (const auto& t : f->tensors()) {
    const std::string type(engine::ggml_traits(t.type).name);
    std::printf("  %-44s %-8s %-24s %12llu\n", std::string(t.name).c_str(), type.c_str(),
                shape_of(t).c_str(), static_cast<unsigned long long>(t.n_bytes));
  }
  std::printf("\nsize per type:\n");
  const auto per_type = bytes_per_type(*f);
  uint64_t total = 0;
  for (const auto& [type, s] : per_type) total += s.bytes;
  for (const auto& [type, s] : per_type) {
    std::printf("  %-8s %5llu tensors %14llu bytes (%5.1f%%)\n", type.c_str(),
                static_cast<unsigned long long>(s.tensors),
                static_cast<unsigned long long>(s.bytes),
                total ? 100.0 * static_cast<double>(s.bytes) / static_cast<double>(total) : 0.0);
  }
  std::printf("  total    %14llu bytes of tensor data, file %llu bytes\n",
              static_cast<unsigned long long>(total),
              static_cast<unsigned long long>(f->file_size()));
}

struct PlanOptions {
  bool plan = false;
  uint32_t tokens = 1, sequences = 1;
  std::string device_profile;  // empty: the device at hand
};

#ifdef RWKVD_HAVE_VULKAN
// The plan of a forward of `tokens` tokens over `sequences` sequences, each wanting its last
// token's logits (a decode step, or a prompt's last chunk).
void print_plan(const std::string& path, const PlanOptions& o) {
  namespace vk = engine::vk;
  if (o.tokens == 0 || o.sequences == 0 || o.sequences > o.tokens) {
    throw engine::EngineError("inspect --plan: 1 <= --sequences <= --tokens");
  }
  vk::DeviceProfile profile;
  vk::Tuning tuning;
  if (o.device_profile.empty()) {
    auto ctx = engine::make_vk_context();
    profile = ctx->device().profile();
    tuning = ctx->device().tuning();
  } else {
    profile = vk::named_device_profile(o.device_profile);
    tuning = vk::choose_tuning(profile.device_class());
  }
  const auto model = engine::Rwkv7Model::load(path);
  const vk::Kernels kernels(profile, tuning, nullptr);
  const vk::WeightLayout weights(*model, UINT32_MAX);
  const auto geometry =
      vk::ForwardGeometry::fit(model->hparams(), o.tokens, o.sequences, uint64_t{UINT32_MAX});
  const vk::ForwardPlanner planner(kernels, *model, weights, geometry);
  std::printf("plan: %s on %s (tuning %s), %u tokens, %u sequences\nkernel choices:", path.c_str(),
              profile.name.c_str(), vk::device_class_name(profile.device_class()), o.tokens,
              o.sequences);
  for (const std::string& c : planner.kernel_choices()) std::printf(" %s", c.c_str());
  std::printf("\n\n%s", vk::plan_text(planner, {o.tokens, o.sequences, o.sequences, o.sequences,
                                                false, (o.tokens + o.sequences - 1) / o.sequences})
                            .c_str());
}
#else
void print_plan(const std::string&, const PlanOptions&) {
  throw engine::EngineError("inspect --plan: this build has no Vulkan engine");
}
#endif

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "Print a GGUF file's metadata and tensor table");
  auto path = std::make_shared<std::string>();
  auto o = std::make_shared<PlanOptions>();
  cmd->add_option("file", *path, "GGUF file")->required();
  cmd->add_flag("--plan", o->plan,
                "Print the Vulkan forward's plan instead: every dispatch of a batch shape, with "
                "its kernel, grid and the forms its products read and write");
  cmd->add_option("--tokens", o->tokens, "With --plan: tokens in the forward")
      ->capture_default_str();
  cmd->add_option("--sequences", o->sequences,
                  "With --plan: sequences among them (of equal lengths)")
      ->capture_default_str();
  cmd->add_option("--device-profile", o->device_profile,
                  "With --plan: a named device instead of the one at hand (lavapipe, lavapipe-coopmat, h200, amd)");
  cmd->callback([path, o] { o->plan ? print_plan(*path, *o) : run_inspect(*path); });
}

}  // namespace rwkvd::tools
