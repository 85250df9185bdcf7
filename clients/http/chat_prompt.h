#pragma once
// OpenAI chat messages as one prompt in the RWKV "world" chat format the models are trained on:
//   System: <system prompt>\n\nUser: <message>\n\nAssistant: <reply>\n\n ... User: <message>
//   \n\nAssistant:
// A blank line ends a turn, so blank lines inside a message are folded into single newlines;
// the reply is generated until the model starts the next user turn (kChatStop).
#include <nlohmann/json.hpp>
#include <string>

namespace rwkvd::http {

inline constexpr const char* kChatStop = "\n\nUser:";

// `messages`: [{role: system|developer|user|assistant, content: string or [{type: text,
// text}]}, ...]; ApiError 400 naming the field at fault otherwise.
std::string chat_prompt(const nlohmann::json& messages);

}  // namespace rwkvd::http
