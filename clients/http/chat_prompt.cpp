#include "clients/http/chat_prompt.h"

#include "clients/http/api_error.h"

namespace rwkvd::http {

using nlohmann::json;

namespace {

const char* speaker(const std::string& role, const std::string& param) {
  if (role == "system" || role == "developer") return "System";
  if (role == "user") return "User";
  if (role == "assistant") return "Assistant";
  throw bad_field(param, "role '" + role + "' is not supported (system, user or assistant)");
}

std::string content_text(const json& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw bad_field(param, "content must be a string or a list of parts");
  std::string out;
  for (const json& part : content) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
        !part["text"].is_string()) {
      throw bad_field(param, "only text parts are supported ({\"type\": \"text\", \"text\": ...})");
    }
    out += part["text"].get<std::string>();
  }
  return out;
}

// CRLF to LF, runs of blank lines to one newline, no blank edges: a message cannot end a turn.
std::string fold(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') continue;
    if (s[i] == '\n' && !out.empty() && out.back() == '\n') continue;
    out += s[i];
  }
  const size_t b = out.find_first_not_of(" \t\n");
  if (b == std::string::npos) return "";
  const size_t e = out.find_last_not_of(" \t\n");
  return out.substr(b, e - b + 1);
}

}  // namespace

std::string chat_prompt(const json& messages) {
  if (!messages.is_array() || messages.empty())
    throw bad_field("messages", "'messages' must be a non-empty list");
  std::string prompt;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string param = "messages[" + std::to_string(i) + "]";
    const json& m = messages[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      throw bad_field(param, param + " must be an object with a string 'role'");
    const char* who = speaker(m["role"].get<std::string>(), param + ".role");
    const json content = m.value("content", json());
    if (content.is_null()) throw bad_field(param + ".content", param + " has no content");
    prompt += who;
    prompt += ": ";
    prompt += fold(content_text(content, param + ".content"));
    prompt += "\n\n";
  }
  return prompt + "Assistant:";
}

}  // namespace rwkvd::http
