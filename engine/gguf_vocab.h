#pragma once
// Reading a world vocab out of a GGUF: llama.cpp's escaped token strings and token types.
#include <string>
#include <string_view>
#include <vector>

namespace rwkvd::engine {

class GgufFile;

// llama.cpp's tokenizer.ggml.token_type values (llama_token_type).
enum class GgufTokenType : int32_t {
  UNDEFINED = 0,
  NORMAL = 1,
  UNKNOWN = 2,
  CONTROL = 3,
  USER_DEFINED = 4,
  UNUSED = 5,
  BYTE = 6,
};

// Token bytes indexed by id from tokenizer.ggml.tokens. Ids whose token_type is CONTROL (`<s>`)
// or UNUSED (`[PAD65530]`...) get no bytes: they are never matched by encode and decode to
// nothing. Throws EngineError naming the file and key on anything malformed.
std::vector<std::string> read_gguf_vocab(const GgufFile& file);

// The escaped token string llama.cpp's converter writes for `bytes`: Python's
// repr(bytes)[2:-1]. `\\`, `\t`, `\n`, `\r`, `\xhh` (lowercase) for other bytes below 0x20 or
// from 0x7f, the byte itself otherwise; a `'` is escaped only when repr would use single quotes,
// i.e. when the bytes also hold a `"`. unescape_gguf_token() inverts it.
std::string escape_gguf_token(std::string_view bytes);

// The bytes of one escaped token string as llama.cpp's rwkv vocab stores it (the converter's
// repr(bytes)[2:-1]): `\t`, `\n`, `\r`, `\xhh` (lowercase hex) and `\<c>` for `c`; any other
// byte stands for itself. Throws EngineError (without location) on a truncated escape or a
// `\x` not followed by two lowercase hex digits.
std::string unescape_gguf_token(std::string_view escaped);

}  // namespace rwkvd::engine
