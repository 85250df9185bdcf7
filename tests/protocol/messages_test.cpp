// Encode/decode round trips and every validation rule of protocol/messages.h.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "protocol/codec.h"
#include "protocol/messages.h"

namespace rwkvd::protocol {
namespace {

Value base(const char* op) {
  return Value(Value::Map{{"v", Value(1)}, {"id", Value(7)}, {"op", Value(op)}});
}

ErrorCode code_of(const Value& msg, const Limits& lim = {}) {
  try {
    parse_request(msg, lim);
  } catch (const RequestError& e) {
    return e.code();
  }
  ADD_FAILURE() << "no error";
  return ErrorCode::kInternal;
}

TEST(Codec, RoundTripsEveryKind) {
  Value v(Value::Map{{"nil", Value()},
                     {"b", Value(true)},
                     {"neg", Value(-5)},
                     {"pos", Value(uint64_t{1} << 40)},
                     {"f", Value(0.25)},
                     {"s", Value("héllo")},
                     {"bin", Value(Value::Bin{std::string("\0\1\2", 3)})},
                     {"arr", Value(Value::Array{Value(1), Value("x")})}});
  const Value back = decode(encode(v));
  EXPECT_TRUE(back.find("nil")->is_nil());
  EXPECT_TRUE(back.find("b")->as_bool());
  EXPECT_EQ(back.find("neg")->as_int(), -5);
  EXPECT_EQ(back.find("pos")->as_uint(), uint64_t{1} << 40);
  EXPECT_EQ(back.find("f")->as_double(), 0.25);
  EXPECT_EQ(back.find("s")->as_str(), "héllo");
  EXPECT_EQ(back.find("bin")->as_bin(), std::string("\0\1\2", 3));
  EXPECT_EQ(back.find("arr")->as_array().size(), 2u);
}

TEST(Codec, RejectsGarbageTrailingBytesAndLimits) {
  EXPECT_THROW(decode(std::string("\xc1", 1)), ProtocolError);  // never-used byte
  EXPECT_THROW(decode(""), ProtocolError);
  std::string two = encode(Value(1)) + encode(Value(2));
  EXPECT_THROW(decode(two), ProtocolError);
  // A declared array length over the cap is refused before allocation: 0xdd = array32.
  std::string huge("\xdd\xff\xff\xff\xff", 5);
  try {
    decode(huge);
    FAIL();
  } catch (const ProtocolError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTooLarge);
  }
  DecodeLimits small;
  small.max_bytes = 4;
  EXPECT_THROW(decode(encode(Value("hello world")), small), ProtocolError);
  Value deep(1);
  for (int i = 0; i < 20; ++i) deep = Value(Value::Array{deep});
  EXPECT_THROW(decode(encode(deep)), ProtocolError);
  // An extension type is a message we do not speak (bad_message), not a size problem.
  try {
    decode(std::string("\xd4\x05\x01", 3));  // fixext1, type 5
    FAIL();
  } catch (const ProtocolError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadMessage);
  }
}

TEST(Request, RoundTripGenerate) {
  Request r;
  r.id = 42;
  r.op = Op::kGenerate;
  r.shm = true;
  r.release = {5, 6};
  r.inputs.push_back(Input{std::nullopt, {1, 2, 3}});
  r.sampling.temperature = 0.5f;
  r.sampling.top_p = 0.9f;
  r.sampling.top_k = 40;
  r.sampling.max_tokens = 100;
  r.sampling.stop = {"\n\n"};
  r.sampling.seed = 99;
  r.stream = true;
  r.return_state = true;
  r.state = std::vector<float>{1.f, 2.f};
  const Request b = decode_request(encode_request(r));
  EXPECT_EQ(b.id, 42u);
  EXPECT_EQ(b.op, Op::kGenerate);
  EXPECT_TRUE(b.shm);
  EXPECT_EQ(b.release, (std::vector<uint64_t>{5, 6}));
  ASSERT_EQ(b.inputs.size(), 1u);
  EXPECT_EQ(b.inputs[0].tokens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_FLOAT_EQ(b.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(b.sampling.top_p, 0.9f);
  EXPECT_EQ(b.sampling.top_k, 40u);
  EXPECT_EQ(b.sampling.max_tokens, 100u);
  EXPECT_EQ(b.sampling.stop, std::vector<std::string>{"\n\n"});
  EXPECT_EQ(b.sampling.seed, 99u);
  EXPECT_TRUE(b.stream);
  EXPECT_TRUE(b.return_state);
  EXPECT_EQ(*b.state, (std::vector<float>{1.f, 2.f}));
}

TEST(Request, RoundTripEmbedManyAndSessionOps) {
  Request r;
  r.id = 1;
  r.op = Op::kEmbed;
  r.inputs.push_back(Input{"hello", {}});
  r.inputs.push_back(Input{std::nullopt, {4, 5}});
  const Request b = decode_request(encode_request(r));
  ASSERT_EQ(b.inputs.size(), 2u);
  EXPECT_EQ(*b.inputs[0].text, "hello");
  EXPECT_EQ(b.inputs[1].tokens, (std::vector<int32_t>{4, 5}));
  for (Op op : {Op::kSessionClose, Op::kSessionFork, Op::kSessionState}) {
    Request s;
    s.op = op;
    s.session = 9;
    EXPECT_EQ(decode_request(encode_request(s)).session, 9u);
  }
  Request rel;
  rel.op = Op::kRelease;
  rel.leases = {1, 2, 3};
  EXPECT_EQ(decode_request(encode_request(rel)).leases, rel.leases);
}

TEST(Request, Defaults) {
  Value m = base("generate");
  m.set("text", Value("hi"));
  const Request r = parse_request(m);
  EXPECT_EQ(r.sampling.max_tokens, 16u);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 1.0f);
  EXPECT_EQ(r.sampling.top_k, 0u);
  EXPECT_FALSE(r.sampling.seed.has_value());
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.shm);
}

TEST(Request, EveryErrorCode) {
  EXPECT_EQ(code_of(Value(3)), ErrorCode::kBadMessage);
  Value nov(Value::Map{{"id", Value(1)}, {"op", Value("info")}});
  EXPECT_EQ(code_of(nov), ErrorCode::kBadVersion);
  Value v2 = base("info");
  v2.set("v", Value(2));
  EXPECT_EQ(code_of(v2), ErrorCode::kBadVersion);
  EXPECT_EQ(code_of(base("frobnicate")), ErrorCode::kUnknownOp);
  EXPECT_EQ(code_of(base("tokenize")), ErrorCode::kMissingField);
  Value t = base("tokenize");
  t.set("text", Value(5));
  EXPECT_EQ(code_of(t), ErrorCode::kBadType);
  Value g = base("generate");
  g.set("text", Value("x"));
  g.set("temperature", Value(std::nan("")));
  EXPECT_EQ(code_of(g), ErrorCode::kBadValue);
  g.set("temperature", Value(-1.0));
  EXPECT_EQ(code_of(g), ErrorCode::kBadValue);
  g.set("temperature", Value(1.0));
  g.set("top_p", Value(0.0));
  EXPECT_EQ(code_of(g), ErrorCode::kBadValue);
  g.set("top_p", Value(1.0));
  g.set("max_tokens", Value(1u << 30));
  EXPECT_EQ(code_of(g), ErrorCode::kBadValue);
  g.set("max_tokens", Value(4));
  g.set("topp", Value(0.5));
  EXPECT_EQ(code_of(g), ErrorCode::kUnknownField);
  Value neg = base("detokenize");
  neg.set("tokens", Value(Value::Array{Value(1), Value(-3)}));
  EXPECT_EQ(code_of(neg), ErrorCode::kBadToken);
  Limits lim;
  lim.max_tokens = 4;
  Value many = base("detokenize");
  many.set("tokens", Value(Value::Array(5, Value(1))));
  EXPECT_EQ(code_of(many, lim), ErrorCode::kTooLarge);
  lim.max_batch = 2;
  Value batch = base("embed");
  batch.set("inputs", Value(Value::Array(3, Value("a"))));
  EXPECT_EQ(code_of(batch, lim), ErrorCode::kTooLarge);
  Value st = base("session_set_state");
  st.set("session", Value(3));
  st.set("state", Value(Value::Bin{"abc"}));
  EXPECT_EQ(code_of(st), ErrorCode::kBadState);
  st.set("state", Value(Value::Bin{}));  // found by request_fuzz: an empty blob
  EXPECT_EQ(code_of(st), ErrorCode::kBadState);
  Value both = base("generate");
  both.set("text", Value("x"));
  both.set("tokens", Value(Value::Array{Value(1)}));
  EXPECT_EQ(code_of(both), ErrorCode::kBadValue);
}

// Sharing (PROTOCOL.md, "Sharing a session"): share/unshare name a session; a fork names its
// source by session id or by share token, exactly one of them; a token is 32 lower-case hex
// digits and is taken by session_fork alone.
TEST(Request, ShareOpsAndForkByToken) {
  const std::string token = "0123456789abcdef0123456789abcdef";
  for (Op op : {Op::kSessionShare, Op::kSessionUnshare}) {
    Request s;
    s.op = op;
    s.session = 9;
    const Request b = decode_request(encode_request(s));
    EXPECT_EQ(b.op, op);
    EXPECT_EQ(b.session, 9u);
    EXPECT_EQ(code_of(base(op_name(op))), ErrorCode::kMissingField);
  }
  Request f;
  f.op = Op::kSessionFork;
  f.token = token;
  const Request b = decode_request(encode_request(f));
  EXPECT_EQ(b.token, token);
  EXPECT_EQ(b.session, 0u);
  Value fork = base("session_fork");
  EXPECT_EQ(code_of(fork), ErrorCode::kMissingField);  // neither
  fork.set("token", Value(token));
  fork.set("session", Value(3));
  EXPECT_EQ(code_of(fork), ErrorCode::kBadValue);  // both
  Value bad = base("session_fork");
  for (const std::string& t : {std::string(), std::string("abc"), token.substr(1), token + "0",
                               std::string(32, 'A'), std::string(32, 'g'), std::string(32, ' ')}) {
    bad.set("token", Value(t));
    EXPECT_EQ(code_of(bad), ErrorCode::kBadValue) << t;
  }
  bad.set("token", Value(12));
  EXPECT_EQ(code_of(bad), ErrorCode::kBadType);
  for (const char* op : {"session_state", "session_share", "session_close", "generate"}) {
    Value other = base(op);
    other.set("session", Value(3));
    other.set("token", Value(token));
    EXPECT_EQ(code_of(other), ErrorCode::kUnknownField) << op;
  }
  EXPECT_TRUE(is_share_token(token));
  EXPECT_FALSE(is_share_token(std::string(31, 'a')));
}

TEST(Request, ErrorKeepsId) {
  Value m = base("generate");  // no text
  try {
    parse_request(m);
    FAIL();
  } catch (const RequestError& e) {
    EXPECT_EQ(e.id(), 7u);
  }
}

// What decoding refuses whole (too large, nested too deeply) still answers with the request's id
// where a scan of the top-level map finds it before what it cannot read.
TEST(Request, UndecodableMessagesKeepTheirIdWhereItCanBeRead) {
  auto id_of = [](const std::string& bytes, const Limits& lim) -> uint64_t {
    try {
      decode_request(bytes, lim);
    } catch (const RequestError& e) {
      EXPECT_EQ(e.code(), ErrorCode::kTooLarge) << e.what();
      return e.id();
    }
    ADD_FAILURE() << "no error";
    return 0;
  };
  Limits small;
  small.max_message_bytes = 1000;
  Value big = base("embed");
  big.set("id", Value(42));
  big.set("text", Value(std::string(5000, 'x')));
  EXPECT_EQ(id_of(encode(big), small), 42u);
  Value deep = Value(Value::Array{});
  for (int i = 0; i < 200; ++i) deep = Value(Value::Array{std::move(deep)});
  Value nested = base("embed");
  nested.set("id", Value(43));
  nested.set("text", std::move(deep));
  EXPECT_EQ(id_of(encode(nested), {}), 43u);
  // An id after what cannot be read, or none: 0.
  Value late(Value::Map{{"v", Value(1)}, {"text", Value(std::string(5000, 'x'))}});
  std::string bytes = encode(late);
  bytes.resize(bytes.size() - 10);  // truncated inside the text: the scan stops there
  EXPECT_EQ(peek_id(bytes), 0u);
  EXPECT_EQ(peek_id(encode(Value(Value::Array{Value(1)}))), 0u);
  EXPECT_EQ(peek_id(encode(Value(Value::Map{{"x", Value(Value::Map{{"id", Value(9)}})}}))), 0u);
}

TEST(Request, AnUnknownOpIsNotEchoedWhole) {
  Value m = base("x");
  m.set("op", Value(std::string(1 << 20, 'o')));
  try {
    parse_request(m);
    FAIL();
  } catch (const RequestError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnknownOp);
    EXPECT_LT(std::strlen(e.what()), 100u);
  }
}

TEST(Request, ValidateForModel) {
  ModelShape shape{100, 10};
  Request r;
  r.inputs.push_back(Input{std::nullopt, {1, 99}});
  EXPECT_NO_THROW(validate_for_model(r, shape));
  r.inputs[0].tokens.push_back(100);
  try {
    validate_for_model(r, shape);
    FAIL();
  } catch (const ProtocolError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadToken);
  }
  r.inputs[0].tokens.pop_back();
  r.state = std::vector<float>(9);
  try {
    validate_for_model(r, shape);
    FAIL();
  } catch (const ProtocolError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadState);
  }
  // Right length, but not a state: NaN or inf would poison everything after it, and so would a
  // value whose square is infinite (2^64 or more). Anywhere in it; values below 2^64 and
  // subnormals are fine.
  const float big = std::nextafter(0x1p64f, 0.0f), tiny = std::numeric_limits<float>::denorm_min();
  r.state = std::vector<float>{big, -big, tiny, -tiny, 0.f, -0.f, 1.f, -1.f, 3.f, 4.f};
  EXPECT_NO_THROW(validate_for_model(r, shape));
  for (float bad : {std::nanf(""), -std::nanf(""), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity(), 0x1p64f, -3e38f,
                    std::numeric_limits<float>::max()}) {
    for (const size_t at : {0u, 7u, 9u}) {
      r.state = std::vector<float>(10, 0.5f);
      (*r.state)[at] = bad;
      try {
        validate_for_model(r, shape);
        ADD_FAILURE() << "accepted " << bad << " at " << at;
      } catch (const ProtocolError& e) {
        EXPECT_EQ(e.code(), ErrorCode::kBadState);
      }
    }
  }
}

TEST(Request, ForwardRoundTripAndRules) {
  for (Output o :
       {Output::kLastLogits, Output::kAllLogits, Output::kLastEmbedding, Output::kAllEmbeddings}) {
    Request r;
    r.op = Op::kForward;
    r.inputs.push_back(Input{std::nullopt, {3, 4}});
    r.output = o;
    r.session = 12;
    const Request b = decode_request(encode_request(r));
    EXPECT_EQ(b.op, Op::kForward);
    EXPECT_EQ(b.output, o);
    EXPECT_EQ(b.session, 12u);
    EXPECT_EQ(b.inputs.at(0).tokens, (std::vector<int32_t>{3, 4}));
    EXPECT_EQ(output_from_name(output_name(o)), o);
  }
  Value f = base("forward");
  f.set("tokens", Value(Value::Array{Value(1)}));
  EXPECT_EQ(parse_request(f).output, Output::kLastLogits);  // the default
  f.set("output", Value("logits"));
  EXPECT_EQ(code_of(f), ErrorCode::kBadValue);
  f.set("output", Value(1));
  EXPECT_EQ(code_of(f), ErrorCode::kBadType);
  Value g = base("generate");
  g.set("text", Value("x"));
  g.set("output", Value("all_logits"));
  EXPECT_EQ(code_of(g), ErrorCode::kUnknownField);
  Value many = base("forward");
  many.set("inputs", Value(Value::Array{Value("a"), Value("b")}));
  EXPECT_EQ(code_of(many), ErrorCode::kUnknownField);
  EXPECT_EQ(code_of(base("forward")), ErrorCode::kMissingField);
}

TEST(Request, ForwardOutputMustFitTheMessageLimit) {
  const ModelShape shape{1000, 10, 100};
  Limits lim;
  lim.max_message_bytes = 4000 * 10;  // 10 rows of logits, 100 rows of embeddings
  Request r;
  r.op = Op::kForward;
  r.inputs.push_back(Input{std::nullopt, std::vector<int32_t>(10, 1)});
  for (Output o :
       {Output::kLastLogits, Output::kAllLogits, Output::kLastEmbedding, Output::kAllEmbeddings}) {
    r.output = o;
    EXPECT_NO_THROW(validate_for_model(r, shape, lim)) << output_name(o);
  }
  EXPECT_EQ(output_shape(Output::kAllLogits, 10, shape), (std::pair<uint64_t, uint64_t>{10, 1000}));
  EXPECT_EQ(output_shape(Output::kLastEmbedding, 10, shape),
            (std::pair<uint64_t, uint64_t>{1, 100}));
  r.inputs[0].tokens.push_back(1);  // 11 rows of logits: too large; the rest still fit
  r.output = Output::kAllLogits;
  try {
    validate_for_model(r, shape, lim);
    FAIL();
  } catch (const ProtocolError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTooLarge);
  }
  r.output = Output::kAllEmbeddings;
  EXPECT_NO_THROW(validate_for_model(r, shape, lim));
  r.output = Output::kLastLogits;
  EXPECT_NO_THROW(validate_for_model(r, shape, lim));
}

TEST(Reply, TensorsAndErrors) {
  const float data[4] = {1, 2, 3, 4};
  Value ok = ok_reply(3);
  ok.set("t", tensor_inline({2, 2}, data, 4));
  ok.set("s", tensor_shm({4}, ShmRef{11, 2, 5, 4096, 16}));
  const Reply r = decode_reply(encode(ok));
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.id, 3u);
  const TensorDesc t = parse_tensor(*r.body.find("t"));
  EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 2}));
  ASSERT_NE(t.data, nullptr);
  EXPECT_EQ(std::memcmp(t.data->data(), data, 16), 0);
  const TensorDesc s = parse_tensor(*r.body.find("s"));
  ASSERT_TRUE(s.shm.has_value());
  EXPECT_EQ(s.shm->lease, 11u);
  EXPECT_EQ(s.shm->generation, 5u);
  const Reply e = decode_reply(encode(error_reply(8, ErrorCode::kBusy, "full")));
  EXPECT_FALSE(e.ok);
  EXPECT_EQ(e.code, ErrorCode::kBusy);
  EXPECT_EQ(e.message, "full");
  EXPECT_STREQ(error_name(ErrorCode::kBadToken), "bad_token");
}

}  // namespace
}  // namespace rwkvd::protocol
