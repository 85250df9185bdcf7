#pragma once
// The rwkvd wire protocol, version 1 (PROTOCOL.md is the reference; this file implements it).
// A request is one msgpack map {v, id, op, ...}; a reply is one msgpack map {v, id, ok, ...}.
// Decoding validates everything that can be checked without the model (types, ranges, limits,
// field names per op); validate_for_model() adds what needs the model (token ids, state size).
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "protocol/codec.h"
#include "protocol/value.h"

namespace rwkvd::protocol {

inline constexpr uint32_t kProtocolVersion = 1;

// Stable numbers: clients match on them. Never renumber; add at the end.
enum class ErrorCode : uint16_t {
  kBadMessage = 1,    // not msgpack, not a map, trailing bytes
  kBadVersion = 2,    // "v" missing or not 1
  kUnknownOp = 3,     // "op" not in the table
  kMissingField = 4,  // a required field is absent
  kBadType = 5,       // a field has the wrong msgpack type
  kBadValue = 6,      // out of range, NaN, contradictory fields
  kUnknownField = 7,  // a field the op does not take (catches typos)
  kTooLarge = 8,      // a limit: message size, tokens, batch, text, stop strings
  kBadToken = 9,      // token id negative or >= vocabulary size
  kUnknownSession = 10,
  kUnknownLease = 11,
  kBadState = 12,        // state blob of the wrong length
  kBusy = 13,            // queue full or no state slot free
  kCancelled = 14,       // the request was cancelled
  kShuttingDown = 15,    // the worker is stopping
  kUnsupported = 16,     // e.g. text ops on a model without a tokenizer
  kInternal = 17,        // an engine failure; the worker keeps serving
  kUnknownRequest = 18,  // cancel: no such request in flight
  kQuotaExceeded = 19,   // a per-client cap: open sessions, requests in flight
};
const char* error_name(ErrorCode code);

class ProtocolError : public std::runtime_error {
 public:
  ProtocolError(ErrorCode code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

// Hard caps, checked before anything of that size is allocated. The worker advertises them in
// the hello/info replies.
struct Limits {
  uint64_t max_message_bytes = 64u << 20;
  uint32_t max_tokens = 65536;                // tokens in one request, all inputs together
  uint32_t max_batch = 256;                   // inputs of one embed request
  uint32_t max_text_bytes = 1u << 20;         // bytes of one text
  uint32_t max_new_tokens = 16384;            // max_tokens of one generate
  uint32_t max_stop = 16;                     // stop strings
  uint32_t max_stop_bytes = 256;              // bytes of one stop string
  uint32_t max_leases = 4096;                 // lease ids in one request
  uint64_t max_shm_input_bytes = 1ull << 30;  // one shared-memory input (shm_input.h)

  DecodeLimits decode_limits() const;
};

enum class Op : uint8_t {
  kHello,
  kInfo,
  kStats,
  kTokenize,
  kDetokenize,
  kGenerate,
  kEmbed,
  kCancel,
  kRelease,
  kRetain,
  kSessionOpen,
  kSessionClose,
  kSessionFork,
  kSessionFeed,
  kSessionState,
  kSessionSetState,
  kForward,  // added at the end: ops are indexed by this order
  kSessionShare,
  kSessionUnshare,
};
const char* op_name(Op op);
std::optional<Op> op_from_name(std::string_view name);

// A share token (session_share): 128 random bits as this many lower-case hex digits.
inline constexpr size_t kShareTokenBytes = 16;
bool is_share_token(std::string_view s);

struct Sampling {
  float temperature = 1.0f;  // 0 = greedy
  float top_p = 1.0f;        // (0, 1]
  uint32_t top_k = 0;        // 0 = off
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint32_t max_tokens = 16;
  std::vector<std::string> stop;
  std::optional<uint64_t> seed;  // absent: the worker picks one and reports it
};

// What a `forward` returns: logits or final-norm hidden states, of the last token or of every
// token (the engine's OutputMode, without the engine dependency).
enum class Output : uint8_t {
  kLastLogits,     // [1, n_vocab]
  kAllLogits,      // [n_tokens, n_vocab]
  kLastEmbedding,  // [1, n_embd]
  kAllEmbeddings,  // [n_tokens, n_embd]
};
const char* output_name(Output o);
std::optional<Output> output_from_name(std::string_view name);
inline bool output_all(Output o) {
  return o == Output::kAllLogits || o == Output::kAllEmbeddings;
}
inline bool output_logits(Output o) {
  return o == Output::kLastLogits || o == Output::kAllLogits;
}

// One input sequence: text (tokenized by the worker) or token ids.
struct Input {
  std::optional<std::string> text;
  std::vector<int32_t> tokens;
};

struct Request {
  uint64_t id = 0;
  Op op = Op::kInfo;
  bool shm = false;               // the client has mapped the ring: tensors may come through it
  std::vector<uint64_t> release;  // leases released before the op runs (piggy-backed)
  std::vector<Input> inputs;      // text/tokens: one; embed "inputs": many
  uint64_t session = 0;           // 0 = none
  uint64_t target = 0;            // cancel: the request id to cancel
  std::vector<uint64_t> leases;   // release / retain ops
  // session_fork: the share token of a session, anyone's (instead of `session`, the client's own).
  std::optional<std::string> token;
  Sampling sampling;
  bool stream = false;
  bool return_state = false;
  std::optional<std::vector<float>> state;  // initial state, raw float32
  // Encoding: send the state as this shared-memory input (shm_input.h) instead of inline.
  // Decoding reads such a state into `state`, or with ShmStates::kLeave names it here.
  struct ShmInputRef {
    std::string name;
    uint64_t bytes = 0;
  };
  std::optional<ShmInputRef> state_shm;
  bool state_was_shm = false;           // decoding: `state` came from a shared-memory input
  Output output = Output::kLastLogits;  // forward only
};

// Decodes and validates a request. On failure throws RequestError carrying the request id
// when it could be read (0 otherwise), so the error reply can still be matched.
class RequestError : public ProtocolError {
 public:
  RequestError(const ProtocolError& e, uint64_t id) : ProtocolError(e), id_(id) {}
  uint64_t id() const { return id_; }

 private:
  uint64_t id_;
};
// What decoding does with a state sent as a shared-memory input: read it into `state`, or leave
// it named in `state_shm` for read_shm_state() (the worker reads such states off its server
// thread: a 2.9B state is 21.6 MB).
enum class ShmStates { kRead, kLeave };
Request decode_request(std::string_view bytes, const Limits& limits = {},
                       ShmStates shm_states = ShmStates::kRead);
Request parse_request(const Value& msg, const Limits& limits = {},
                      ShmStates shm_states = ShmStates::kRead);
// Reads the shared-memory input `state_shm` names into `state` (nothing where none): throws
// ProtocolError (bad_state) as decoding would have.
void read_shm_state(Request& req);
std::string encode_request(const Request& req);

// What validation needs to know about the loaded model.
struct ModelShape {
  uint32_t n_vocab = 0;
  uint64_t state_floats = 0;
  uint32_t n_embd = 0;
};
// Token ids in range, state blob length, top_k, and (forward) that the output tensor fits in
// limits.max_message_bytes; throws ProtocolError.
void validate_for_model(const Request& req, const ModelShape& shape, const Limits& limits = {});
// Rows x columns of a forward's output for n_tokens input tokens.
std::pair<uint64_t, uint64_t> output_shape(Output o, uint64_t n_tokens, const ModelShape& shape);
void validate_tokens(const std::vector<int32_t>& tokens, uint32_t n_vocab);

// ---- replies ----

// A tensor in a reply: inline bytes or a place in the shared-memory ring.
struct ShmRef {
  uint64_t lease = 0;
  uint32_t slot = 0;
  uint32_t generation = 0;
  uint64_t offset = 0;  // bytes from the start of the segment
  uint64_t bytes = 0;
};
Value tensor_inline(const std::vector<int64_t>& shape, const float* data, size_t n);
Value tensor_shm(const std::vector<int64_t>& shape, const ShmRef& ref);
struct TensorDesc {
  std::vector<int64_t> shape;
  std::optional<ShmRef> shm;
  const std::string* data = nullptr;  // inline bytes (points into the Value)
  uint64_t numel() const;
};
TensorDesc parse_tensor(const Value& v, std::string_view what = "tensor");

Value ok_reply(uint64_t id);
// `{v, id: 0, ok: true, heartbeat: true}`: the worker is alive and still working on this
// client's requests (PROTOCOL.md, Heartbeats). Not a reply to any request.
Value heartbeat_message();
// A client that has heard nothing for this many heartbeat intervals presumes the worker dead.
inline constexpr uint32_t kHeartbeatLiveness = 3;
Value error_reply(uint64_t id, ErrorCode code, const std::string& message);

struct Reply {
  uint64_t id = 0;
  bool ok = false;
  bool more = false;       // a stream chunk; more messages follow for this id
  bool heartbeat = false;  // heartbeat_message(): not a reply, only a sign of life
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
  Value body;  // the whole map
};
Reply decode_reply(std::string_view bytes, const Limits& limits = {});

}  // namespace rwkvd::protocol
