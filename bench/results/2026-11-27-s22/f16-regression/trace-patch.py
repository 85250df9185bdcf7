# Applies the temporary dispatch trace of session 23 to a checkout (python3 trace-patch.py DIR):
# with $TRACE_BIND set, every pipeline lookup (name, constants), push-constant block and
# dispatch grid goes to stderr. For comparing two commits' commands; never committed to the code.
import sys,re
root=sys.argv[1]
p=root+'/engine/vk/pipelines.cpp'
s=open(p).read()
s=s.replace("""  std::lock_guard<std::mutex> lock(mu_);
  Key key{name, spec};
""","""  std::lock_guard<std::mutex> lock(mu_);
  Key key{name, spec};
  if (std::getenv("TRACE_BIND")) { std::fprintf(stderr, "GET %s", name.c_str()); for (auto v : spec) std::fprintf(stderr, " %u", v); std::fprintf(stderr, "\\n"); }
""",1)
if '#include <cstdio>' not in s: s='#include <cstdio>\n#include <cstdlib>\n'+s
open(p,'w').write(s)
p=root+'/engine/vk/kernels.cpp'
s=open(p).read()
s=s.replace("""  vkCmdPushConstants(cb, pipes_.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, size, pc);
""","""  vkCmdPushConstants(cb, pipes_.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, size, pc);
  if (std::getenv("TRACE_BIND")) { std::fprintf(stderr, "PC"); for (uint32_t i = 0; i < size / 4; ++i) std::fprintf(stderr, " %u", static_cast<const uint32_t*>(pc)[i]); std::fprintf(stderr, "\\n"); }
""",1)
s=s.replace('#include "engine/error.h"\n','#include "engine/error.h"\n#include <cstdio>\nstatic void traced_dispatch(VkCommandBuffer cb, uint32_t x, uint32_t y, uint32_t z) { if (std::getenv("TRACE_BIND")) std::fprintf(stderr, "DISPATCH %u %u %u\\n", x, y, z); vkCmdDispatch(cb, x, y, z); }\n#define vkCmdDispatch traced_dispatch\n',1)
open(p,'w').write(s)
# The pipelines made ahead (Pipelines::prepare, Kernels::warm's keys): PREP lines.
p = root + '/engine/vk/pipelines.cpp'
s = open(p).read()
s = s.replace("""void Pipelines::prepare(const std::vector<Key>& keys) {
""", """void Pipelines::prepare(const std::vector<Key>& keys) {
  if (std::getenv("TRACE_BIND")) { for (const Key& k : keys) { std::fprintf(stderr, "PREP %s", k.first.c_str()); for (auto v : k.second) std::fprintf(stderr, " %u", v); std::fprintf(stderr, "\\n"); } }
""", 1)
open(p, 'w').write(s)
