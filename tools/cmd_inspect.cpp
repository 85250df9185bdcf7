// `rwkvd inspect FILE.gguf`: the metadata, the tensor table and the size per type.
#include <cstdio>
#include <string>

#include "engine/gguf.h"
#include "tools/commands.h"
#include "tools/model_summary.h"

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

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "Print a GGUF file's metadata and tensor table");
  auto path = std::make_shared<std::string>();
  cmd->add_option("file", *path, "GGUF file")->required();
  cmd->callback([path] { run_inspect(*path); });
}

}  // namespace rwkvd::tools
