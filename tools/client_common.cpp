#include "tools/client_common.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace rwkvd::tools {

using protocol::Value;

std::unique_ptr<client::Client> ClientArgs::connect() const {
  return std::make_unique<client::Client>(
      endpoint, std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)), !no_shm,
      server_key);
}

protocol::Input ClientArgs::input() const {
  if (!tokens.empty()) return protocol::Input{std::nullopt, parse_token_list(tokens)};
  if (!text.empty()) return protocol::Input{text, {}};
  throw std::runtime_error("give --text or --tokens");
}

void add_client_options(CLI::App* cmd, ClientArgs& a, bool with_prompt) {
  cmd->add_option("--endpoint", a.endpoint,
                  "worker endpoint (default: $RWKVD_ENDPOINT or the per-user ipc socket)");
  cmd->add_option("--timeout", a.timeout_s, "seconds to wait for a reply")->capture_default_str();
  cmd->add_flag("--no-shm", a.no_shm, "take tensors inline instead of through shared memory");
  cmd->add_option("--server-key", a.server_key,
                  "the worker's CURVE public key, for tcp to another host's worker (default: "
                  "$RWKVD_SERVER_KEY, else this user's own worker's)");
  if (with_prompt) {
    cmd->add_option("--text", a.text, "input text");
    cmd->add_option("--tokens", a.tokens, "input token ids, comma separated");
  }
}

std::vector<int32_t> parse_token_list(const std::string& s) {
  std::vector<int32_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    size_t used = 0;
    const long long v = std::stoll(item, &used);
    if (used != item.size() || v < 0 || v > INT32_MAX)
      throw std::runtime_error("bad token id '" + item + "'");
    out.push_back(static_cast<int32_t>(v));
  }
  return out;
}

nlohmann::json to_json(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kNil:
      return nullptr;
    case Value::Kind::kBool:
      return v.as_bool();
    case Value::Kind::kInt:
      return v.as_int();
    case Value::Kind::kUint:
      return v.as_uint();
    case Value::Kind::kFloat:
      return v.as_double();
    case Value::Kind::kStr:
      return v.as_str();
    case Value::Kind::kBin:
      return "<" + std::to_string(v.as_bin().size()) + " bytes>";
    case Value::Kind::kArray: {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& e : v.as_array()) a.push_back(to_json(e));
      return a;
    }
    case Value::Kind::kMap: {
      nlohmann::json o = nlohmann::json::object();
      for (const auto& [k, e] : v.as_map()) o[k] = to_json(e);
      return o;
    }
  }
  return nullptr;
}

void write_f32(const std::string& path, std::span<const float> data) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(data.data()),
          static_cast<std::streamsize>(data.size_bytes()));
  if (!f) throw std::runtime_error("cannot write " + path);
}

}  // namespace rwkvd::tools
