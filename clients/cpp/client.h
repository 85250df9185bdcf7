#pragma once
// The C++ client of rwkvd (PROTOCOL.md): a DEALER socket to the worker, one call at a time per
// Client (not thread-safe; use one per thread). Result tensors come through the worker's
// shared-memory ring when the client could map it: a Tensor then views the ring in place and
// holds the lease, which is released (piggy-backed on the next request) when the last copy of
// the Tensor is destroyed: its bytes stay as they are for as long as it lives. A Tensor that
// outlives its Client becomes a private copy of what it shows. Depends on protocol/ only.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "protocol/messages.h"

namespace rwkvd::client {

// The worker answered with an error.
class WorkerError : public std::runtime_error {
 public:
  WorkerError(protocol::ErrorCode code, const std::string& message)
      : std::runtime_error(std::string(protocol::error_name(code)) + ": " + message), code_(code) {}
  protocol::ErrorCode code() const { return code_; }

 private:
  protocol::ErrorCode code_;
};

// No reply within the timeout (the worker is gone, stuck, or the request was dropped), or no
// message at all, heartbeats included, for 3 of the worker's heartbeat intervals (it is gone:
// seconds, not the whole timeout; PROTOCOL.md, Heartbeats). The client then starts over on a fresh
// socket with the same identity: the next call reaches whichever worker listens on the endpoint (a
// restarted one included) without reconnecting by hand, and keeps its sessions and leases if it is
// the same worker.
class TimeoutError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// No worker to talk to: no socket file at an ipc endpoint, or no answer to the first hello on a
// connection within a second (3 s where a process accepted the connection: connect.h). The message
// names the endpoint and how to start a worker. An endpoint another user could have set up throws
// protocol::UnsafePathError instead.
class NoWorkerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A float32 result: owned (inline) or a view of the shared-memory ring (with its lease).
class Tensor {
 public:
  std::vector<int64_t> shape;
  std::span<const float> data() const { return {ptr_, count_}; }
  bool in_shared_memory() const { return lease_ != nullptr; }
  uint64_t numel() const { return count_; }

 private:
  friend class Client;
  std::vector<float> owned_;
  const float* ptr_ = nullptr;
  size_t count_ = 0;
  std::shared_ptr<void> lease_;  // releases the ring lease when the last copy goes
};

struct GenerateOptions {
  protocol::Sampling sampling;
  bool return_state = false;
  std::optional<std::vector<float>> state;  // start from this state (stateless requests)
};

struct GenerateResult {
  std::vector<int32_t> tokens;
  std::string text;
  std::string finish_reason;  // "length", "stop" or "cancelled"
  uint64_t prompt_tokens = 0;
  uint64_t completion_tokens = 0;
  uint64_t seed = 0;
  std::optional<Tensor> state;
};

struct ForwardOptions {
  protocol::Output output = protocol::Output::kLastLogits;
  uint64_t session = 0;                     // continue (and advance) this session's state
  std::optional<std::vector<float>> state;  // or start a stateless request from this state
  bool return_state = false;
};

struct ForwardResult {
  Tensor output;  // [1 or n_tokens, n_vocab or n_embd]
  uint64_t n_tokens = 0;
  uint64_t position = 0;  // with a session: its position after this request
  std::optional<Tensor> state;
};

struct Chunk {
  std::vector<int32_t> tokens;
  std::string text;
};

class Client {
 public:
  // endpoint "" = protocol::default_endpoint(); use_shm=false forces inline tensors. Connects
  // and says hello at once: NoWorkerError within about a second when nobody answers.
  // server_key: the worker's CURVE public key for tcp ("" = $RWKVD_SERVER_KEY or the user's
  // own worker's, protocol/curve_keys.h).
  explicit Client(std::string endpoint = "",
                  std::chrono::milliseconds timeout = std::chrono::seconds(60), bool use_shm = true,
                  std::string server_key = "");
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const std::string& endpoint() const { return endpoint_; }
  bool shm_mapped() const;
  // States of at least this many bytes (default 1 MiB) go to the worker as shared-memory inputs
  // (PROTOCOL.md) while the ring is mapped; smaller ones, or SIZE_MAX, inline.
  void set_shm_input_min_bytes(size_t bytes);

  protocol::Value hello();
  protocol::Value info();
  protocol::Value stats();
  std::vector<int32_t> tokenize(const std::string& text);
  std::string detokenize(const std::vector<int32_t>& tokens);

  // on_chunk (when set) streams pieces as they are generated; the result then holds only what
  // the last message carried, plus the summary fields.
  GenerateResult generate(const protocol::Input& prompt, const GenerateOptions& options = {},
                          const std::function<void(const Chunk&)>& on_chunk = {},
                          uint64_t session = 0);
  // Several generations in flight at once on this one connection (sessions: one per prompt, or
  // none): the worker batches them into the same engine steps, e.g. the field prompts of a
  // document on forks of its session. Results in the order of the prompts; no streaming.
  std::vector<GenerateResult> generate_all(const std::vector<protocol::Input>& prompts,
                                           const std::vector<uint64_t>& sessions = {},
                                           const GenerateOptions& options = {});
  // [n_inputs, n_embd], final norm applied, the last token of each input.
  Tensor embed(const std::vector<protocol::Input>& inputs);

  // Opens a session, from `state` where one is given (read here, not kept).
  uint64_t session_open(std::optional<std::span<const float>> state = std::nullopt);
  void session_close(uint64_t session);
  uint64_t session_fork(uint64_t session);
  // Shares a session of this client (PROTOCOL.md, "Sharing a session"): any client holding the
  // token (32 hex digits) can fork the session, i.e. read its state, until it is closed or
  // unshared. Sharing it again returns the same token.
  std::string session_share(uint64_t session);
  void session_unshare(uint64_t session);  // the token dies; forks made with it stay
  // A new session of this client with a copy of the state of the session `token` shares, as it
  // is now (whoever owns it); it counts against this client's session cap.
  uint64_t session_fork_shared(const std::string& token);
  uint64_t session_feed(uint64_t session, const protocol::Input& input);  // -> position
  Tensor session_state(uint64_t session);  // [n_layer, head_size + 2, n_embd]
  void session_set_state(uint64_t session, std::span<const float> state);
  Tensor session_embed(uint64_t session, const protocol::Input& input);
  // Runs the input without sampling and returns logits or final-norm hidden states, of the last
  // token or of every token (op `forward`).
  ForwardResult forward(const protocol::Input& input, const ForwardOptions& options = {});

  // Sends the releases of dropped tensors now instead of with the next request.
  void flush_releases();

  // Low level: sends `req` (its id is assigned here) and returns the final reply; stream chunks
  // go to on_more. Throws WorkerError for an error reply, TimeoutError.
  protocol::Reply call(protocol::Request& req,
                       const std::function<void(const protocol::Reply&)>& on_more = {});
  // Sends every request (ids assigned here) before reading any reply, then returns their final
  // replies in order: one round trip's latency for all of them. No streamed requests. `state`,
  // where given, is every request's starting state (instead of its req.state).
  std::vector<protocol::Reply> call_all(std::vector<protocol::Request>& reqs,
                                        std::optional<std::span<const float>> state = std::nullopt);
  Tensor to_tensor(const protocol::Value& v);

 private:
  // `state`, where given, is the request's state (instead of req.state): written straight into a
  // shared-memory input where one can be made, copied into the request only to go inline.
  // (An empty state is still a state: the worker rejects it, as it would one sent inline.)
  void send(protocol::Request& req, std::optional<std::span<const float>> state = std::nullopt);
  protocol::Reply call_with_state(protocol::Request& req,
                                  std::optional<std::span<const float>> state,
                                  const std::function<void(const protocol::Reply&)>& on_more = {});
  // A fresh socket to a worker that answered a hello (connect.h), or NoWorkerError.
  void connect();
  void receive(std::span<const uint64_t> ids,
               const std::function<void(size_t, protocol::Reply)>& on_reply);
  protocol::Request generate_request(const protocol::Input& prompt, const GenerateOptions& options,
                                     uint64_t session) const;
  GenerateResult generate_result(const protocol::Reply& r);
  struct Impl;
  struct InputsInFlight;
  std::unique_ptr<Impl> impl_;
  std::string endpoint_;
};

}  // namespace rwkvd::client
