#pragma once
// Opens a model on the backend a command asks for ("cpu" or "gpu").
#include <memory>
#include <string>

#include "engine/backend.h"

namespace rwkvd::tools {

std::unique_ptr<engine::Backend> open_backend(const std::string& model_path,
                                              const std::string& device,
                                              const engine::BackendOptions& options);

}  // namespace rwkvd::tools
