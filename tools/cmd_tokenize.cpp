// `rwkvd tokenize (--model FILE.gguf | --vocab FILE.txt) [--text T] [--decode]`: text to a JSON
// array of ids, or with --decode a JSON array of ids to the raw bytes they stand for.
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "engine/gguf.h"
#include "engine/tokenizer.h"
#include "tools/commands.h"

namespace rwkvd::tools {
namespace {

struct TokenizeOptions {
  std::string model;
  std::string vocab;
  std::string text;
  bool decode = false;
  CLI::Option* text_option = nullptr;
};

// Bytes as they are: text is tokenized byte for byte, so no newline translation or trimming.
std::string read_stdin() {
  std::string data;
  char buf[1 << 16];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0) data.append(buf, n);
  if (std::ferror(stdin)) throw std::runtime_error("tokenize: error reading stdin");
  return data;
}

std::unique_ptr<engine::WorldTokenizer> load_tokenizer(const TokenizeOptions& o) {
  if (!o.model.empty()) {
    const auto file = engine::GgufFile::open(o.model);
    return engine::WorldTokenizer::from_gguf(*file);
  }
  return engine::WorldTokenizer::from_vocab_file(o.vocab);
}

std::vector<int32_t> parse_ids(const std::string& input) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(input);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::runtime_error(std::string("tokenize --decode: input is not JSON: ") + e.what());
  }
  if (!j.is_array()) throw std::runtime_error("tokenize --decode: expected a JSON array of ids");
  std::vector<int32_t> ids;
  ids.reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i) {
    const auto& v = j[i];
    using Limits = std::numeric_limits<int32_t>;
    bool fits = false;
    if (v.is_number_unsigned()) {
      fits = v.get<uint64_t>() <= uint64_t{Limits::max()};
    } else if (v.is_number_integer()) {
      fits = v.get<int64_t>() >= Limits::min() && v.get<int64_t>() <= Limits::max();
    }
    if (!fits) {
      throw std::runtime_error("tokenize --decode: element " + std::to_string(i) + " (" + v.dump() +
                               ") is not a 32-bit integer id");
    }
    ids.push_back(v.get<int32_t>());
  }
  return ids;
}

void run_tokenize(const TokenizeOptions& o) {
  const auto tok = load_tokenizer(o);
  const std::string input = o.text_option->count() > 0 ? o.text : read_stdin();
  if (o.decode) {
    const std::string bytes = tok->decode(parse_ids(input));
    std::fwrite(bytes.data(), 1, bytes.size(), stdout);
  } else {
    const std::string json = nlohmann::json(tok->encode(input)).dump();
    std::printf("%s\n", json.c_str());
  }
  if (std::fflush(stdout) != 0) throw std::runtime_error("tokenize: error writing stdout");
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "tokenize", "Encode text (--text or stdin) to a JSON array of ids, or --decode ids to text");
  auto o = std::make_shared<TokenizeOptions>();
  auto* source = cmd->add_option_group("vocab source", "exactly one of --model and --vocab");
  source->add_option("--model", o->model, "GGUF model whose tokenizer.ggml.tokens to use")
      ->check(CLI::ExistingFile);
  source->add_option("--vocab", o->vocab, "World vocab file (rwkv_vocab_v20230424.txt)")
      ->check(CLI::ExistingFile);
  source->require_option(1);
  o->text_option =
      cmd->add_option("--text", o->text, "Input (text, or a JSON id array with --decode)");
  cmd->add_flag("--decode", o->decode, "Read a JSON array of ids and print their raw bytes");
  cmd->callback([o] { run_tokenize(*o); });
}

}  // namespace rwkvd::tools
