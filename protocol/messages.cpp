#include "protocol/messages.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "protocol/shm_input.h"
#include "protocol/shm_ring.h"

namespace rwkvd::protocol {
namespace {

// At most the first 32 bytes of a string a client sent, for an error message: a reply never
// echoes a whole field back (an unknown op of megabytes).
std::string excerpt(const std::string& s) {
  if (s.size() <= 32) return s;
  size_t n = 32;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;  // whole characters
  return s.substr(0, n) + "...";
}

struct OpInfo {
  Op op;
  const char* name;
  // Fields the op takes besides the common v, id, op, release, shm.
  std::vector<std::string_view> fields;
};

const std::vector<OpInfo>& op_table() {
  static const std::vector<std::string_view> sampling = {
      "max_tokens",        "temperature", "top_p", "top_k", "presence_penalty",
      "frequency_penalty", "stop",        "seed",  "stream"};
  auto with_sampling = [](std::vector<std::string_view> f) {
    f.insert(f.end(), sampling.begin(), sampling.end());
    return f;
  };
  static const std::vector<OpInfo> table = {
      {Op::kHello, "hello", {}},
      {Op::kInfo, "info", {}},
      {Op::kStats, "stats", {}},
      {Op::kTokenize, "tokenize", {"text"}},
      {Op::kDetokenize, "detokenize", {"tokens"}},
      {Op::kGenerate, "generate",
       with_sampling({"text", "tokens", "session", "state", "return_state"})},
      {Op::kEmbed, "embed", {"text", "tokens", "inputs", "session", "state", "return_state"}},
      {Op::kCancel, "cancel", {"target"}},
      {Op::kRelease, "release", {"leases"}},
      {Op::kRetain, "retain", {"leases"}},
      {Op::kSessionOpen, "session_open", {"state"}},
      {Op::kSessionClose, "session_close", {"session"}},
      {Op::kSessionFork, "session_fork", {"session", "token"}},
      {Op::kSessionFeed, "session_feed", {"session", "text", "tokens"}},
      {Op::kSessionState, "session_state", {"session"}},
      {Op::kSessionSetState, "session_set_state", {"session", "state"}},
      {Op::kForward, "forward", {"text", "tokens", "session", "state", "return_state", "output"}},
      {Op::kSessionShare, "session_share", {"session"}},
      {Op::kSessionUnshare, "session_unshare", {"session"}},
  };
  return table;
}

const OpInfo& info_of(Op op) {
  return op_table().at(static_cast<size_t>(op));
}

[[noreturn]] void fail(ErrorCode code, const std::string& msg) {
  throw ProtocolError(code, msg);
}

float get_float(const Value& m, const char* key, float def, float lo, float hi) {
  const Value* v = m.find(key);
  if (v == nullptr) return def;
  const double d = v->as_double(key);
  if (!std::isfinite(d)) fail(ErrorCode::kBadValue, std::string(key) + " must be finite");
  if (d < lo || d > hi) {
    fail(ErrorCode::kBadValue, std::string(key) + " = " + std::to_string(d) + " is outside [" +
                                   std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return static_cast<float>(d);
}

uint64_t get_uint(const Value& m, const char* key, uint64_t def, uint64_t max) {
  const Value* v = m.find(key);
  if (v == nullptr) return def;
  const uint64_t u = v->as_uint(key);
  if (u > max) {
    fail(ErrorCode::kBadValue,
         std::string(key) + " = " + std::to_string(u) + " exceeds " + std::to_string(max));
  }
  return u;
}

bool get_bool(const Value& m, const char* key, bool def) {
  const Value* v = m.find(key);
  return v == nullptr ? def : v->as_bool(key);
}

std::vector<int32_t> parse_tokens(const Value& v, const std::string& what, const Limits& lim) {
  const auto& arr = v.as_array(what);
  if (arr.size() > lim.max_tokens) {
    fail(ErrorCode::kTooLarge, what + ": " + std::to_string(arr.size()) +
                                   " tokens exceed the limit of " + std::to_string(lim.max_tokens));
  }
  std::vector<int32_t> out;
  out.reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) {
    const Value& e = arr[i];
    if (!e.is_int()) {
      fail(ErrorCode::kBadType, what + "[" + std::to_string(i) + "]: expected integer, got " +
                                    Value::kind_name(e.kind()));
    }
    if (e.kind() == Value::Kind::kInt || e.as_uint() > uint64_t{INT32_MAX}) {
      fail(ErrorCode::kBadToken, what + "[" + std::to_string(i) + "]: token id out of range");
    }
    out.push_back(static_cast<int32_t>(e.as_uint()));
  }
  return out;
}

Input parse_input(const Value& v, const std::string& what, const Limits& lim) {
  Input in;
  if (v.kind() == Value::Kind::kStr) {
    if (v.as_str().size() > lim.max_text_bytes) {
      fail(ErrorCode::kTooLarge, what + ": text of " + std::to_string(v.as_str().size()) +
                                     " bytes exceeds the limit of " +
                                     std::to_string(lim.max_text_bytes));
    }
    in.text = v.as_str();
  } else if (v.kind() == Value::Kind::kArray) {
    in.tokens = parse_tokens(v, what, lim);
  } else {
    fail(ErrorCode::kBadType,
         what + ": expected string or array of token ids, got " + Value::kind_name(v.kind()));
  }
  return in;
}

std::vector<uint64_t> parse_ids(const Value& v, const char* what, const Limits& lim) {
  const auto& arr = v.as_array(what);
  if (arr.size() > lim.max_leases) {
    fail(ErrorCode::kTooLarge,
         std::string(what) + ": more than " + std::to_string(lim.max_leases) + " ids");
  }
  std::vector<uint64_t> out;
  out.reserve(arr.size());
  for (const auto& e : arr) out.push_back(e.as_uint(what));
  return out;
}

Sampling parse_sampling(const Value& m, const Limits& lim) {
  Sampling s;
  s.max_tokens = static_cast<uint32_t>(get_uint(m, "max_tokens", 16, lim.max_new_tokens));
  s.temperature = get_float(m, "temperature", 1.0f, 0.0f, 100.0f);
  s.top_p = get_float(m, "top_p", 1.0f, 0.0f, 1.0f);
  if (s.top_p <= 0.0f) fail(ErrorCode::kBadValue, "top_p must be in (0, 1]");
  s.top_k = static_cast<uint32_t>(get_uint(m, "top_k", 0, UINT32_MAX));
  s.presence_penalty = get_float(m, "presence_penalty", 0.0f, -10.0f, 10.0f);
  s.frequency_penalty = get_float(m, "frequency_penalty", 0.0f, -10.0f, 10.0f);
  if (const Value* v = m.find("seed")) s.seed = v->as_uint("seed");
  if (const Value* v = m.find("stop")) {
    const Value::Array* arr = nullptr;
    Value::Array single;
    if (v->kind() == Value::Kind::kStr) {
      single.push_back(*v);
      arr = &single;
    } else {
      arr = &v->as_array("stop");
    }
    if (arr->size() > lim.max_stop) {
      fail(ErrorCode::kTooLarge, "stop: more than " + std::to_string(lim.max_stop) + " strings");
    }
    for (const auto& e : *arr) {
      const auto& str = e.as_str("stop[]");
      if (str.empty() || str.size() > lim.max_stop_bytes) {
        fail(ErrorCode::kBadValue,
             "stop strings must have 1.." + std::to_string(lim.max_stop_bytes) + " bytes");
      }
      s.stop.push_back(str);
    }
  }
  return s;
}

// A state sent as a shared-memory input ({shm: name, bytes: n}): the object it names.
Request::ShmInputRef parse_shm_ref(const Value& v, const Limits& lim) {
  const Value* name = v.find("shm");
  const Value* n = v.find("bytes");
  if (name == nullptr || n == nullptr) {
    fail(ErrorCode::kBadState, "state: a map must hold shm (the object's name) and bytes");
  }
  const uint64_t bytes = n->as_uint("state.bytes");
  if (bytes > lim.max_shm_input_bytes) {
    fail(ErrorCode::kTooLarge,
         "state: " + std::to_string(bytes) + " bytes > " + std::to_string(lim.max_shm_input_bytes));
  }
  return {std::string(name->as_str("state.shm")), bytes};
}

// A state sent inline (bin).
std::vector<float> parse_inline_state(const Value& v) {
  const auto& bytes = v.as_bin("state");
  if (bytes.empty()) fail(ErrorCode::kBadState, "state: empty");
  if (bytes.size() % sizeof(float) != 0) {
    fail(ErrorCode::kBadState, "state: " + std::to_string(bytes.size()) +
                                   " bytes is not a whole number of float32 values");
  }
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

void put_tokens(Value::Map& m, const char* key, const std::vector<int32_t>& tokens) {
  Value::Array a;
  a.reserve(tokens.size());
  for (int32_t t : tokens) a.emplace_back(t);
  m.emplace_back(key, Value(std::move(a)));
}

Value input_value(const Input& in) {
  if (in.text) return Value(*in.text);
  Value::Map tmp;
  put_tokens(tmp, "t", in.tokens);
  return std::move(tmp.front().second);
}

}  // namespace

const char* error_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kBadMessage:
      return "bad_message";
    case ErrorCode::kBadVersion:
      return "bad_version";
    case ErrorCode::kUnknownOp:
      return "unknown_op";
    case ErrorCode::kMissingField:
      return "missing_field";
    case ErrorCode::kBadType:
      return "bad_type";
    case ErrorCode::kBadValue:
      return "bad_value";
    case ErrorCode::kUnknownField:
      return "unknown_field";
    case ErrorCode::kTooLarge:
      return "too_large";
    case ErrorCode::kBadToken:
      return "bad_token";
    case ErrorCode::kUnknownSession:
      return "unknown_session";
    case ErrorCode::kUnknownLease:
      return "unknown_lease";
    case ErrorCode::kBadState:
      return "bad_state";
    case ErrorCode::kBusy:
      return "busy";
    case ErrorCode::kCancelled:
      return "cancelled";
    case ErrorCode::kShuttingDown:
      return "shutting_down";
    case ErrorCode::kUnsupported:
      return "unsupported";
    case ErrorCode::kInternal:
      return "internal";
    case ErrorCode::kUnknownRequest:
      return "unknown_request";
    case ErrorCode::kQuotaExceeded:
      return "quota_exceeded";
  }
  return "unknown";
}

const char* output_name(Output o) {
  switch (o) {
    case Output::kLastLogits:
      return "last_logits";
    case Output::kAllLogits:
      return "all_logits";
    case Output::kLastEmbedding:
      return "last_embedding";
    case Output::kAllEmbeddings:
      return "all_embeddings";
  }
  return "unknown";
}

std::optional<Output> output_from_name(std::string_view name) {
  for (Output o :
       {Output::kLastLogits, Output::kAllLogits, Output::kLastEmbedding, Output::kAllEmbeddings}) {
    if (name == output_name(o)) return o;
  }
  return std::nullopt;
}

std::pair<uint64_t, uint64_t> output_shape(Output o, uint64_t n_tokens, const ModelShape& shape) {
  return {output_all(o) ? n_tokens : 1, output_logits(o) ? shape.n_vocab : shape.n_embd};
}

DecodeLimits Limits::decode_limits() const {
  DecodeLimits d;
  d.max_bytes = max_message_bytes;
  d.max_array = std::max<size_t>({max_tokens, max_batch, max_leases, max_stop});
  d.max_map = 64;
  d.max_str = std::max<size_t>(max_text_bytes, 4096);
  d.max_bin = max_message_bytes;
  d.max_depth = 6;
  return d;
}

const char* op_name(Op op) {
  return info_of(op).name;
}

std::optional<Op> op_from_name(std::string_view name) {
  for (const auto& info : op_table()) {
    if (name == info.name) return info.op;
  }
  return std::nullopt;
}

bool is_share_token(std::string_view s) {
  return s.size() == 2 * kShareTokenBytes && is_random_hex(s);
}

void read_shm_state(Request& req) {
  if (!req.state_shm) return;
  req.state = read_shm_input(req.state_shm->name, req.state_shm->bytes);
  req.state_shm.reset();
}

Request parse_request(const Value& msg, const Limits& lim, ShmStates shm_states) {
  if (msg.kind() != Value::Kind::kMap) {
    throw RequestError(ProtocolError(ErrorCode::kBadMessage, "a request must be a map"), 0);
  }
  Request req;
  if (const Value* id = msg.find("id"); id != nullptr && id->kind() == Value::Kind::kUint) {
    req.id = id->as_uint();
  }
  try {
    const Value* v = msg.find("v");
    if (v == nullptr) fail(ErrorCode::kBadVersion, "missing protocol version field 'v'");
    if (!v->is_int() || v->kind() == Value::Kind::kInt || v->as_uint() != kProtocolVersion) {
      fail(ErrorCode::kBadVersion, "unsupported protocol version (this worker speaks v" +
                                       std::to_string(kProtocolVersion) + ")");
    }
    const Value* id = msg.find("id");
    if (id == nullptr) fail(ErrorCode::kMissingField, "missing field 'id'");
    req.id = id->as_uint("id");
    const Value* opv = msg.find("op");
    if (opv == nullptr) fail(ErrorCode::kMissingField, "missing field 'op'");
    const auto op = op_from_name(opv->as_str("op"));
    if (!op) fail(ErrorCode::kUnknownOp, "unknown op '" + excerpt(opv->as_str()) + "'");
    req.op = *op;
    const auto& allowed = info_of(req.op).fields;
    for (const auto& [key, unused] : msg.as_map()) {
      if (key == "v" || key == "id" || key == "op" || key == "release" || key == "shm") continue;
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        fail(ErrorCode::kUnknownField,
             "op '" + std::string(op_name(req.op)) + "' takes no field '" + key + "'");
      }
    }
    req.shm = get_bool(msg, "shm", false);
    if (const Value* r = msg.find("release")) req.release = parse_ids(*r, "release", lim);

    auto need = [&](const char* key) -> const Value& {
      const Value* f = msg.find(key);
      if (f == nullptr) {
        fail(ErrorCode::kMissingField,
             "op '" + std::string(op_name(req.op)) + "' needs field '" + key + "'");
      }
      return *f;
    };
    // text / tokens / inputs: the sequences the op reads.
    const Value* text = msg.find("text");
    const Value* tokens = msg.find("tokens");
    const Value* inputs = msg.find("inputs");
    const int given = (text != nullptr) + (tokens != nullptr) + (inputs != nullptr);
    if (given > 1) fail(ErrorCode::kBadValue, "give only one of 'text', 'tokens', 'inputs'");
    if (text != nullptr) {
      if (text->kind() != Value::Kind::kStr) {
        fail(ErrorCode::kBadType,
             std::string("text: expected string, got ") + Value::kind_name(text->kind()));
      }
      req.inputs.push_back(parse_input(*text, "text", lim));
    }
    if (tokens != nullptr) {
      Input in;
      in.tokens = parse_tokens(*tokens, "tokens", lim);
      req.inputs.push_back(std::move(in));
    }
    if (inputs != nullptr) {
      const auto& arr = inputs->as_array("inputs");
      if (arr.empty()) fail(ErrorCode::kBadValue, "inputs: empty");
      if (arr.size() > lim.max_batch) {
        fail(ErrorCode::kTooLarge, "inputs: batch of " + std::to_string(arr.size()) +
                                       " exceeds the limit of " + std::to_string(lim.max_batch));
      }
      size_t total = 0;
      for (size_t i = 0; i < arr.size(); ++i) {
        req.inputs.push_back(parse_input(arr[i], "inputs[" + std::to_string(i) + "]", lim));
        total += req.inputs.back().tokens.size();
      }
      if (total > lim.max_tokens) {
        fail(ErrorCode::kTooLarge, "inputs: " + std::to_string(total) +
                                       " tokens in all exceed the limit of " +
                                       std::to_string(lim.max_tokens));
      }
    }
    switch (req.op) {
      case Op::kTokenize:
        need("text");
        break;
      case Op::kDetokenize:
        need("tokens");
        break;
      case Op::kGenerate:
      case Op::kSessionFeed:
      case Op::kEmbed:
      case Op::kForward:
        if (given == 0) {
          fail(ErrorCode::kMissingField,
               "op '" + std::string(op_name(req.op)) + "' needs 'text' or 'tokens'");
        }
        break;
      default:
        break;
    }
    // A fork names the session to copy by its id (the client's own) or by a share token
    // (anyone's): one of the two. The message never repeats a token (logs, THREAT_MODEL.md).
    if (const Value* t = msg.find("token")) {
      const std::string& token = t->as_str("token");
      if (!is_share_token(token)) {
        fail(ErrorCode::kBadValue, "token: expected the " + std::to_string(2 * kShareTokenBytes) +
                                       " lower-case hex digits of a session_share reply");
      }
      if (msg.find("session") != nullptr) {
        fail(ErrorCode::kBadValue, "give only one of 'session' and 'token'");
      }
      req.token = token;
    }
    if (const Value* s = msg.find("session")) {
      req.session = s->as_uint("session");
      if (req.session == 0) fail(ErrorCode::kUnknownSession, "session id 0 does not exist");
    }
    switch (req.op) {
      case Op::kSessionFork:
        if (!req.token && req.session == 0) {
          fail(ErrorCode::kMissingField, "op 'session_fork' needs 'session' or 'token'");
        }
        break;
      case Op::kSessionClose:
      case Op::kSessionFeed:
      case Op::kSessionState:
      case Op::kSessionSetState:
      case Op::kSessionShare:
      case Op::kSessionUnshare:
        need("session");
        break;
      default:
        break;
    }
    if (req.op == Op::kCancel) req.target = need("target").as_uint("target");
    if (req.op == Op::kRelease || req.op == Op::kRetain) {
      req.leases = parse_ids(need("leases"), "leases", lim);
    }
    if (req.op == Op::kSessionSetState) need("state");
    if (const Value* s = msg.find("state")) {
      req.state_was_shm = s->kind() == Value::Kind::kMap;
      if (req.state_was_shm) {
        req.state_shm = parse_shm_ref(*s, lim);
        if (shm_states == ShmStates::kRead) read_shm_state(req);
      } else {
        req.state = parse_inline_state(*s);
      }
    }
    req.return_state = get_bool(msg, "return_state", false);
    if (req.op == Op::kGenerate) {
      req.sampling = parse_sampling(msg, lim);
      req.stream = get_bool(msg, "stream", false);
    }
    if (const Value* o = msg.find("output")) {
      const auto out = output_from_name(o->as_str("output"));
      if (!out) {
        fail(ErrorCode::kBadValue, "output '" + excerpt(o->as_str()) +
                                       "' is not one of last_logits, all_logits, last_embedding, "
                                       "all_embeddings");
      }
      req.output = *out;
    }
    if (req.session != 0 && req.state && req.op != Op::kSessionSetState) {
      fail(ErrorCode::kBadValue,
           "'state' and 'session' are exclusive: a session has its own state");
    }
    if (req.op == Op::kEmbed && req.inputs.size() > 1 &&
        (req.session != 0 || req.state || req.return_state)) {
      fail(ErrorCode::kBadValue, "'session', 'state' and 'return_state' take a single input");
    }
    if (req.op == Op::kGenerate || req.op == Op::kSessionFeed || req.op == Op::kEmbed ||
        req.op == Op::kForward) {
      for (const auto& in : req.inputs) {
        if (!in.text && in.tokens.empty()) fail(ErrorCode::kBadValue, "an input has no tokens");
      }
    }
  } catch (const ProtocolError& e) {
    throw RequestError(e, req.id);
  }
  return req;
}

Request decode_request(std::string_view bytes, const Limits& lim, ShmStates shm_states) {
  Value msg;
  try {
    msg = decode(bytes, lim.decode_limits());
  } catch (const ProtocolError& e) {
    throw RequestError(e, peek_id(bytes));
  }
  return parse_request(msg, lim, shm_states);
}

std::string encode_request(const Request& req) {
  Value::Map m;
  m.emplace_back("v", Value(kProtocolVersion));
  m.emplace_back("id", Value(req.id));
  m.emplace_back("op", Value(op_name(req.op)));
  if (req.shm) m.emplace_back("shm", Value(true));
  if (!req.release.empty()) {
    Value::Array a(req.release.begin(), req.release.end());
    m.emplace_back("release", Value(std::move(a)));
  }
  if (req.op == Op::kEmbed && req.inputs.size() != 1) {
    Value::Array a;
    for (const auto& in : req.inputs) a.push_back(input_value(in));
    m.emplace_back("inputs", Value(std::move(a)));
  } else if (!req.inputs.empty()) {
    const Input& in = req.inputs.front();
    if (in.text) {
      m.emplace_back("text", Value(*in.text));
    } else {
      put_tokens(m, "tokens", in.tokens);
    }
  }
  if (req.session != 0) m.emplace_back("session", Value(req.session));
  if (req.token) m.emplace_back("token", Value(*req.token));
  if (req.op == Op::kCancel) m.emplace_back("target", Value(req.target));
  if (req.op == Op::kRelease || req.op == Op::kRetain) {
    m.emplace_back("leases", Value(Value::Array(req.leases.begin(), req.leases.end())));
  }
  if (req.state_shm) {
    Value::Map ref;
    ref.emplace_back("shm", Value(req.state_shm->name));
    ref.emplace_back("bytes", Value(req.state_shm->bytes));
    m.emplace_back("state", Value(std::move(ref)));
  } else if (req.state) {
    Value::Bin b;
    b.bytes.assign(reinterpret_cast<const char*>(req.state->data()),
                   req.state->size() * sizeof(float));
    m.emplace_back("state", Value(std::move(b)));
  }
  if (req.return_state) m.emplace_back("return_state", Value(true));
  if (req.op == Op::kForward) m.emplace_back("output", Value(output_name(req.output)));
  if (req.op == Op::kGenerate) {
    const Sampling& s = req.sampling;
    m.emplace_back("max_tokens", Value(s.max_tokens));
    m.emplace_back("temperature", Value(s.temperature));
    m.emplace_back("top_p", Value(s.top_p));
    m.emplace_back("top_k", Value(s.top_k));
    m.emplace_back("presence_penalty", Value(s.presence_penalty));
    m.emplace_back("frequency_penalty", Value(s.frequency_penalty));
    if (!s.stop.empty()) m.emplace_back("stop", Value(Value::Array(s.stop.begin(), s.stop.end())));
    if (s.seed) m.emplace_back("seed", Value(*s.seed));
    if (req.stream) m.emplace_back("stream", Value(true));
  }
  return encode(Value(std::move(m)));
}

void validate_tokens(const std::vector<int32_t>& tokens, uint32_t n_vocab) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || static_cast<uint32_t>(tokens[i]) >= n_vocab) {
      fail(ErrorCode::kBadToken, "token " + std::to_string(tokens[i]) + " at position " +
                                     std::to_string(i) + " is outside the vocabulary [0, " +
                                     std::to_string(n_vocab) + ")");
    }
  }
}

namespace {

// No NaN or infinity: no value with every exponent bit set. Without a branch a value the
// compiler vectorises it: a 2.9B state (5.4M floats) in ~0.8 ms where std::isfinite with an
// early exit took ~1.5 on the server thread, for every request that carries one.
// Bounded too: a value of magnitude 2^64 (1.8e19) or more is finite but its square is not, and
// the engine's norms square what the state gives them, so such a state answers NaN logits.
bool all_bounded(std::span<const float> v) {
  constexpr uint32_t kExponent = 0x7f800000u, kTooLarge = (127u + 64u) << 23;  // 2^64
  uint32_t special = 0;
  for (const float f : v) {
    uint32_t w;
    std::memcpy(&w, &f, sizeof w);
    special |= (w & kExponent) >= kTooLarge ? 1u : 0u;
  }
  return special == 0;
}

}  // namespace

void validate_for_model(const Request& req, const ModelShape& shape, const Limits& limits) {
  for (const auto& in : req.inputs) validate_tokens(in.tokens, shape.n_vocab);
  if (req.state && req.state->size() != shape.state_floats) {
    fail(ErrorCode::kBadState, "state has " + std::to_string(req.state->size()) +
                                   " floats; this model's state has " +
                                   std::to_string(shape.state_floats));
  }
  // A state of the right length from elsewhere (another dtype, garbage) usually shows itself by
  // NaN or infinite values, which would poison every token after it.
  if (req.state && !all_bounded(*req.state)) {
    fail(ErrorCode::kBadState,
         "state holds NaN, infinite or huge values (magnitude 2^64 = 1.8e19 or more)");
  }
  if (req.sampling.top_k > shape.n_vocab) {
    fail(ErrorCode::kBadValue, "top_k = " + std::to_string(req.sampling.top_k) +
                                   " exceeds the vocabulary size " + std::to_string(shape.n_vocab));
  }
  if (req.op == Op::kForward && !req.inputs.empty()) {
    // The reply must stay decodable by a client holding the same limits, inline or not.
    const auto [rows, cols] = output_shape(req.output, req.inputs.front().tokens.size(), shape);
    const uint64_t bytes = rows * cols * sizeof(float);
    if (bytes > limits.max_message_bytes) {
      fail(ErrorCode::kTooLarge,
           std::string("output ") + output_name(req.output) + " of " + std::to_string(rows) +
               " x " + std::to_string(cols) + " floats (" + std::to_string(bytes) +
               " bytes) exceeds max_message_bytes " + std::to_string(limits.max_message_bytes) +
               "; send fewer tokens per request");
    }
  }
}

// ---- replies ----

namespace {
Value shape_value(const std::vector<int64_t>& shape) {
  return Value(Value::Array(shape.begin(), shape.end()));
}
}  // namespace

Value tensor_inline(const std::vector<int64_t>& shape, const float* data, size_t n) {
  Value::Bin b;
  b.bytes.assign(reinterpret_cast<const char*>(data), n * sizeof(float));
  // Built by moves: a braced list of pairs would copy the bytes once more (a state is 21.6 MB).
  Value::Map m;
  m.reserve(3);
  m.emplace_back("dtype", Value("f32"));
  m.emplace_back("shape", shape_value(shape));
  m.emplace_back("data", Value(std::move(b)));
  return Value(std::move(m));
}

Value tensor_shm(const std::vector<int64_t>& shape, const ShmRef& ref) {
  Value::Map shm{{"lease", Value(ref.lease)},
                 {"slot", Value(ref.slot)},
                 {"generation", Value(ref.generation)},
                 {"offset", Value(ref.offset)},
                 {"bytes", Value(ref.bytes)}};
  return Value(Value::Map{
      {"dtype", Value("f32")}, {"shape", shape_value(shape)}, {"shm", Value(std::move(shm))}});
}

uint64_t TensorDesc::numel() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

TensorDesc parse_tensor(const Value& v, std::string_view what) {
  const std::string w(what);
  v.as_map(w);
  TensorDesc t;
  const Value* dtype = v.find("dtype");
  if (dtype == nullptr || dtype->as_str(w + ".dtype") != "f32") {
    fail(ErrorCode::kBadValue, w + ": dtype must be f32");
  }
  const Value* shape = v.find("shape");
  if (shape == nullptr) fail(ErrorCode::kMissingField, w + ": no shape");
  // The element count sizes the client's copy and view: it must not wrap (a shape whose product
  // wraps to the byte count would otherwise pass the size check below).
  uint64_t bytes = sizeof(float);
  for (const auto& d : shape->as_array(w + ".shape")) {
    const uint64_t dim = d.as_uint(w + ".shape[]");
    if (dim > uint64_t{INT64_MAX} || __builtin_mul_overflow(bytes, dim, &bytes)) {
      fail(ErrorCode::kTooLarge, w + ": shape too large");
    }
    t.shape.push_back(static_cast<int64_t>(dim));
  }
  if (const Value* s = v.find("shm")) {
    ShmRef r;
    auto get = [&](const char* k) {
      const Value* f = s->find(k);
      if (f == nullptr) fail(ErrorCode::kMissingField, w + ".shm: no " + k);
      return f->as_uint(k);
    };
    r.lease = get("lease");
    const uint64_t slot = get("slot");
    const uint64_t generation = get("generation");
    if (slot > UINT32_MAX || generation > UINT32_MAX) {
      fail(ErrorCode::kBadValue, w + ".shm: slot or generation out of range");
    }
    r.slot = static_cast<uint32_t>(slot);
    r.generation = static_cast<uint32_t>(generation);
    r.offset = get("offset");
    r.bytes = get("bytes");
    if (r.bytes != bytes) fail(ErrorCode::kBadValue, w + ": size mismatch");
    t.shm = r;
  } else if (const Value* d = v.find("data")) {
    t.data = &d->as_bin(w + ".data");
    if (t.data->size() != bytes) {
      fail(ErrorCode::kBadValue, w + ": size mismatch");
    }
  } else {
    fail(ErrorCode::kMissingField, w + ": neither data nor shm");
  }
  return t;
}

Value ok_reply(uint64_t id) {
  return Value(Value::Map{{"v", Value(kProtocolVersion)}, {"id", Value(id)}, {"ok", Value(true)}});
}

Value heartbeat_message() {
  Value v = ok_reply(0);
  v.set("heartbeat", Value(true));
  return v;
}

Value error_reply(uint64_t id, ErrorCode code, const std::string& message) {
  Value::Map err{{"code", Value(static_cast<uint32_t>(code))},
                 {"name", Value(error_name(code))},
                 {"message", Value(message)}};
  return Value(Value::Map{{"v", Value(kProtocolVersion)},
                          {"id", Value(id)},
                          {"ok", Value(false)},
                          {"error", Value(std::move(err))}});
}

Reply decode_reply(std::string_view bytes, const Limits& lim) {
  DecodeLimits dl = lim.decode_limits();
  dl.max_map = 256;  // replies (stats) are bigger maps than requests
  dl.max_depth = 8;
  Reply r;
  r.body = decode(bytes, dl);
  r.body.as_map("reply");
  const Value* id = r.body.find("id");
  const Value* ok = r.body.find("ok");
  if (id == nullptr || ok == nullptr) fail(ErrorCode::kBadMessage, "reply without id/ok");
  r.id = id->as_uint("id");
  r.ok = ok->as_bool("ok");
  if (const Value* more = r.body.find("more")) r.more = more->as_bool("more");
  if (const Value* hb = r.body.find("heartbeat")) r.heartbeat = hb->as_bool("heartbeat");
  if (!r.ok) {
    const Value* err = r.body.find("error");
    if (err == nullptr) fail(ErrorCode::kBadMessage, "error reply without error");
    const Value* code = err->find("code");
    const Value* msg = err->find("message");
    r.code = static_cast<ErrorCode>(code ? code->as_uint("code") : 17);
    r.message = msg ? msg->as_str("message") : "";
  }
  return r;
}

}  // namespace rwkvd::protocol
