#pragma once
// The .pth route of `rwkvd convert`: PyTorch checkpoints are pickles, which only Python reads
// safely and fully, so tools/pth_to_st.py turns one into a SafeTensors file first.
#include <string>

namespace rwkvd::tools {

// Whether `path` starts like a zip (torch.save's format).
bool looks_like_zip(const std::string& path);

// Where pth_to_st.py lives: $RWKVD_TOOLS_DIR if set, else this source tree's tools/ (from the
// compiled-in RWKVD_SOURCE_DIR).
std::string tools_dir();

// Runs `/usr/bin/python3 <tools_dir>/pth_to_st.py pth st`; the script's messages go to our
// stderr. Throws std::runtime_error if it cannot start or fails.
void run_pth_to_st(const std::string& pth, const std::string& st);

}  // namespace rwkvd::tools
