#pragma once
// Shared by the client subcommands (generate, embed, tokenize-remote, state, stats): the
// --endpoint/--timeout options, prompt options and Value -> JSON for printing.
#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "clients/cpp/client.h"

namespace rwkvd::tools {

struct ClientArgs {
  std::string endpoint;  // "" = default
  double timeout_s = 120;
  bool no_shm = false;
  std::string server_key;  // the worker's CURVE public key ("" = $RWKVD_SERVER_KEY or ours)
  std::string text;
  std::string tokens;  // "1,2,3"
  std::unique_ptr<client::Client> connect() const;
  // --text or --tokens as one protocol input; throws if neither.
  protocol::Input input() const;
};

void add_client_options(CLI::App* cmd, ClientArgs& a, bool with_prompt);
nlohmann::json to_json(const protocol::Value& v);
std::vector<int32_t> parse_token_list(const std::string& s);
void write_f32(const std::string& path, std::span<const float> data);

}  // namespace rwkvd::tools
