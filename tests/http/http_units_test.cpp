// The HTTP front's pure pieces: the RWKV world chat prompt, field checks with OpenAI-style
// errors, base64 float32, the Prometheus text of a stats map.
#include <gtest/gtest.h>

#include <cstring>
#include <regex>
#include <sstream>

#include "clients/http/api_error.h"
#include "clients/http/base64.h"
#include "clients/http/chat_prompt.h"
#include "clients/http/fields.h"
#include "clients/http/metrics.h"

namespace rwkvd::http {
namespace {

using nlohmann::json;
using protocol::Value;

// The ApiError `fn` throws: its status and body.
template <class F>
ApiError error_of(F fn) {
  try {
    fn();
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no ApiError";
  return ApiError(0, "", "");
}

TEST(ChatPrompt, TurnsInTheWorldFormat) {
  const json m = json::parse(R"([
    {"role": "system", "content": "Be kind."},
    {"role": "user", "content": "Hi\r\n\r\n\r\nthere  "},
    {"role": "assistant", "content": [{"type": "text", "text": "Hello"}, {"type": "text", "text": "!"}]},
    {"role": "developer", "content": "\n\nQuiet."}])");
  EXPECT_EQ(chat_prompt(m),
            "System: Be kind.\n\nUser: Hi\nthere\n\nAssistant: Hello!\n\nSystem: Quiet.\n\n"
            "Assistant:");
}

TEST(ChatPrompt, RefusesWhatItCannotSay) {
  for (const char* bad :
       {R"([])", R"("hi")", R"([{"role": "tool", "content": "x"}])", R"([{"content": "x"}])",
        R"([{"role": "user"}])", R"([{"role": "user", "content": [{"type": "image_url"}]}])"}) {
    const ApiError e = error_of([&] { chat_prompt(json::parse(bad)); });
    EXPECT_EQ(e.status(), 400) << bad;
    EXPECT_TRUE(e.body()["error"]["param"].get<std::string>().starts_with("messages")) << bad;
  }
}

TEST(Fields, TypesRangesAndUnknownFields) {
  const json body = json::parse(
      R"({"t": 0.5, "n": 3, "big": 18446744073709551615, "neg": -4, "s": "x", "b": true,
          "stop": ["a", "b"], "one": "c", "extra": 1, "nul": null})");
  Fields f(body);
  EXPECT_EQ(*f.number("t", 0, 1), 0.5);
  EXPECT_EQ(*f.integer("n", 1, 5), 3);
  EXPECT_EQ(error_of([&] { f.integer("big", 0, INT64_MAX); }).body()["error"]["param"], "big");
  EXPECT_EQ(error_of([&] { f.integer("neg", 0, 9); }).status(), 400);
  EXPECT_EQ(error_of([&] { f.integer("n", 4, 9); }).status(), 400);
  EXPECT_EQ(error_of([&] { f.number("s", 0, 1); }).body()["error"]["param"], "s");
  EXPECT_EQ(*f.boolean("b"), true);
  EXPECT_EQ(f.strings("stop"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(f.strings("one"), (std::vector<std::string>{"c"}));
  EXPECT_FALSE(f.string("nul").has_value());  // null is absent
  EXPECT_FALSE(f.string("missing").has_value());
  const ApiError e = error_of([&] { f.finish(); });
  EXPECT_EQ(e.body()["error"]["param"], "extra");
  EXPECT_EQ(e.body()["error"]["code"], "unknown_parameter");
}

TEST(Fields, BodiesThatAreNotJsonObjects) {
  for (const char* bad : {"", "{", "[1]", "\"s\"", "{\"a\": }"}) {
    const ApiError e = error_of([&] { parse_body(bad); });
    EXPECT_EQ(e.status(), 400) << bad;
    EXPECT_EQ(e.body()["error"]["code"], "invalid_json") << bad;
  }
}

TEST(Base64, FloatsRoundTripAsLittleEndianBytes) {
  for (size_t n : {0u, 1u, 2u, 3u, 7u, 100u}) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i) * 0.37f - 5.0f;
    const std::string text = base64_floats(v);
    EXPECT_EQ(text.size(), 4 * ((n * 4 + 2) / 3));
    EXPECT_EQ(floats_from_base64(text, "state"), v);
  }
  EXPECT_EQ(base64_floats(std::vector<float>{1.0f}), "AACAPw==");  // 0x3f800000, little-endian
  EXPECT_EQ(error_of([] { floats_from_base64("abc", "state"); }).status(), 400);
  EXPECT_EQ(error_of([] { floats_from_base64("!!!!", "state"); }).status(), 400);
  EXPECT_EQ(error_of([] { floats_from_base64("AAA=", "state"); }).status(), 400);  // 2 bytes
}

TEST(Metrics, StatsBecomePrometheusText) {
  const Value stats(Value::Map{
      {"uptime_s", Value(12.5)},
      {"requests", Value(Value::Map{{"generate", Value(uint64_t{7})}, {"embed", Value(2)}})},
      {"latency_ms", Value(Value::Map{{"generate", Value(Value::Map{{"count", Value(4)},
                                                                    {"mean", Value(2.5)},
                                                                    {"p50", Value(2.0)},
                                                                    {"p99", Value(4.0)}})}})},
      {"generate",
       Value(Value::Map{
           {"batch_sequences",
            Value(Value::Map{{"count", Value(3)},
                             {"mean", Value(2.0)},
                             {"le", Value(Value::Map{{"1", Value(1)}, {"4", Value(2)}})}})}})}});
  const std::string text = prometheus_text(stats);
  for (const char* line :
       {"rwkvd_uptime_seconds 12.5\n", "rwkvd_requests_total{op=\"generate\"} 7\n",
        "rwkvd_requests_total{op=\"embed\"} 2\n", "# TYPE rwkvd_requests_total counter\n",
        "rwkvd_request_latency_ms{op=\"generate\",quantile=\"0.99\"} 4\n",
        "rwkvd_request_latency_ms_sum{op=\"generate\"} 10\n",
        "rwkvd_generate_batch_sequences_bucket{le=\"1\"} 1\n",
        "rwkvd_generate_batch_sequences_bucket{le=\"4\"} 3\n",
        "rwkvd_generate_batch_sequences_bucket{le=\"+Inf\"} 3\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
  // Every line a comment or `name{labels} value`; absent stats give no family.
  std::istringstream in(text);
  const std::regex sample(R"(^[a-z_]+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? [-+0-9.e]+$)");
  for (std::string line; std::getline(in, line);)
    EXPECT_TRUE(line.starts_with("# ") || std::regex_match(line, sample)) << line;
  EXPECT_EQ(text.find("rwkvd_sessions"), std::string::npos);
}

TEST(ApiErrors, StatusesHaveOpenAiBodies) {
  for (int status : {404, 405, 413, 400, 500}) {
    const json b = api_error_of_status(status).body();
    ASSERT_TRUE(b.contains("error"));
    EXPECT_EQ(b["error"].size(), 4u);
  }
}

}  // namespace
}  // namespace rwkvd::http
