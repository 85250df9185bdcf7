#include "clients/cpp/client.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <zmq.hpp>

#include "clients/cpp/connect.h"
#include "protocol/codec.h"
#include "protocol/endpoint.h"
#include "protocol/ring_view.h"
#include "protocol/shm_input.h"
#include "protocol/shm_ring.h"

namespace rwkvd::client {

using protocol::Op;
using protocol::Request;
using protocol::Value;

namespace {

// A request's starting state from its options, as a view, where they have one.
template <class Options>
std::optional<std::span<const float>> state_of(const Options& o) {
  if (!o.state) return std::nullopt;
  return std::span<const float>(*o.state);
}

// The leases of this client's Tensors: those alive (where their bytes are) and the ids of
// dropped ones, waiting to ride on the next request. Shared with the lease handles so that a
// Tensor may outlive its Client: the Client's destructor first turns the bytes of the Tensors
// still alive into private copies (ShmReader::detach) and hands their leases back with the rest.
struct PendingReleases {
  struct Live {
    protocol::ShmReader* reader;  // kept alive by the lease's handle
    uint64_t offset;
    uint64_t bytes;
  };
  std::mutex mu;
  std::vector<uint64_t> ids;
  std::map<uint64_t, Live> live;
};

struct LeaseHandle {
  LeaseHandle(const protocol::ShmRef& ref, std::shared_ptr<protocol::ShmReader> r,
              std::shared_ptr<PendingReleases> p)
      : lease(ref.lease), reader(std::move(r)), pending(p) {
    std::lock_guard lock(p->mu);
    p->live[lease] = {reader.get(), ref.offset, ref.bytes};
  }
  LeaseHandle(const LeaseHandle&) = delete;  // exactly one handle per lease: one release
  LeaseHandle& operator=(const LeaseHandle&) = delete;
  uint64_t lease;
  std::shared_ptr<protocol::ShmReader> reader;  // keeps the mapping alive under the view
  std::weak_ptr<PendingReleases> pending;
  ~LeaseHandle() {
    if (auto p = pending.lock()) {
      std::lock_guard lock(p->mu);
      if (p->live.erase(lease) != 0) p->ids.push_back(lease);  // else released when detached
    }
  }
};

std::vector<int32_t> int_list(const Value* v) {
  std::vector<int32_t> out;
  if (v == nullptr) return out;
  for (const auto& e : v->as_array("tokens")) out.push_back(static_cast<int32_t>(e.as_int()));
  return out;
}

const Value& need(const Value& body, const char* key) {
  const Value* v = body.find(key);
  if (v == nullptr) {
    throw protocol::ProtocolError(protocol::ErrorCode::kBadMessage,
                                  std::string("reply has no '") + key + "'");
  }
  return *v;
}

}  // namespace

struct Client::Impl {
  zmq::context_t ctx{1};
  zmq::socket_t sock;
  // Our identity at the worker, which owns our leases and sessions by it. Random (not
  // guessable) and kept across socket resets, so a reconnect to the same worker keeps both.
  std::string routing_id = "c" + protocol::random_hex(16);
  std::string endpoint;
  std::chrono::milliseconds timeout;
  bool use_shm;
  bool said_hello = false;
  // kHeartbeatLiveness heartbeat intervals of the worker we said hello to (0: it sends none, or
  // no hello yet): silence that long while waiting means the worker is gone.
  std::chrono::milliseconds liveness{0};
  uint64_t next_id = 1;
  std::shared_ptr<protocol::ShmReader> reader;
  // Shared-memory inputs of the requests in flight (send()); removed once their replies came.
  std::vector<protocol::ShmInput> inputs;
  size_t shm_input_min_bytes = size_t{1} << 20;
  std::shared_ptr<PendingReleases> pending = std::make_shared<PendingReleases>();

  std::string server_key;
  // Drops the socket: nothing queued for a dead worker survives, and the next call connects
  // afresh and says hello again (mapping the ring of whichever worker now listens there).
  void disconnect() {
    if (sock) sock.close();  // linger 0 (connect.h): queued requests are dropped
    forget_ring();
  }
  void forget_ring() {
    reader.reset();
    said_hello = false;
    liveness = std::chrono::milliseconds(0);
  }
};

Client::Client(std::string endpoint, std::chrono::milliseconds timeout, bool use_shm,
               std::string server_key)
    : impl_(std::make_unique<Impl>()),
      endpoint_(endpoint.empty() ? protocol::default_endpoint() : std::move(endpoint)) {
  impl_->endpoint = endpoint_;
  impl_->timeout = timeout;
  impl_->use_shm = use_shm;
  impl_->server_key = std::move(server_key);
  connect();
}

void Client::connect() {
  impl_->disconnect();
  impl_->sock = open_dealer(impl_->ctx, endpoint_, impl_->routing_id, impl_->server_key);
}

Client::~Client() {
  // Hand back what we hold without waiting for the answer: a dead worker must not make a
  // destructor block for the whole timeout. If it is lost, the worker frees the leases once it
  // finds this client gone. Tensors still alive keep their bytes as private copies.
  try {
    Request req;
    req.op = Op::kRelease;
    {
      std::lock_guard lock(impl_->pending->mu);
      req.leases.swap(impl_->pending->ids);
      auto& live = impl_->pending->live;
      for (auto it = live.begin(); it != live.end();) {
        if (!it->second.reader->detach(it->second.offset, it->second.bytes)) {
          ++it;
          continue;
        }
        req.leases.push_back(it->first);
        it = live.erase(it);
      }
    }
    if (req.leases.empty() || !impl_->sock) return;
    req.id = impl_->next_id++;
    const std::string bytes = protocol::encode_request(req);
    impl_->sock.set(zmq::sockopt::linger, 200);
    (void)impl_->sock.send(zmq::buffer(bytes), zmq::send_flags::dontwait);
  } catch (...) {
  }
}

// Removes the shared-memory inputs sent by one call or call_all when it returns or throws: by
// then the worker has read them (it reads while decoding a request, before any reply).
struct Client::InputsInFlight {
  Impl& impl;
  ~InputsInFlight() { impl.inputs.clear(); }
};

void Client::set_shm_input_min_bytes(size_t bytes) {
  impl_->shm_input_min_bytes = bytes;
}

bool Client::shm_mapped() const {
  return impl_->reader != nullptr;
}

protocol::Reply Client::call(Request& req,
                             const std::function<void(const protocol::Reply&)>& on_more) {
  return call_with_state(req, std::nullopt, on_more);
}

protocol::Reply Client::call_with_state(
    Request& req, std::optional<std::span<const float>> state,
    const std::function<void(const protocol::Reply&)>& on_more) {
  const InputsInFlight inputs{*impl_};
  send(req, state);
  protocol::Reply final;
  receive({&req.id, 1}, [&](size_t, protocol::Reply r) {
    if (r.more) {
      if (on_more) on_more(r);
      return;
    }
    final = std::move(r);
  });
  return final;
}

std::vector<protocol::Reply> Client::call_all(std::vector<Request>& reqs,
                                              std::optional<std::span<const float>> state) {
  const InputsInFlight inputs{*impl_};
  std::vector<uint64_t> ids;
  for (Request& req : reqs) {
    if (req.stream) throw std::invalid_argument("call_all: streamed requests are not supported");
    send(req, state);
    ids.push_back(req.id);
  }
  std::vector<protocol::Reply> out(reqs.size());
  receive(ids, [&](size_t i, protocol::Reply r) { out[i] = std::move(r); });
  return out;
}

void Client::send(Request& req, std::optional<std::span<const float>> state) {
  if (!impl_->sock) connect();  // after a timeout dropped the last one
  req.id = impl_->next_id++;
  // A ring whose worker has exited belongs to a worker that was restarted under us: stop asking
  // for shm tensors until a hello maps the new one.
  if (impl_->reader && !impl_->reader->worker_alive()) impl_->forget_ring();
  req.shm = impl_->reader != nullptr;
  {
    std::lock_guard lock(impl_->pending->mu);
    req.release.insert(req.release.end(), impl_->pending->ids.begin(), impl_->pending->ids.end());
    impl_->pending->ids.clear();
  }
  // A large state goes through a shared-memory object of ours where the worker sees our objects
  // (we mapped its ring: same host): one copy, where inline it is packed, sent through the
  // socket and unpacked (PROTOCOL.md, "Shared-memory inputs"). Inline if the object fails.
  if (!state && req.state) state = std::span<const float>(*req.state);
  if (state && impl_->reader && state->size() * sizeof(float) >= impl_->shm_input_min_bytes) {
    try {
      impl_->inputs.emplace_back(std::as_bytes(*state));
      req.state_shm =
          Request::ShmInputRef{impl_->inputs.back().name(), impl_->inputs.back().bytes()};
      req.state.reset();
    } catch (const std::system_error&) {
    }
  }
  if (state && !req.state_shm && !req.state) req.state.emplace(state->begin(), state->end());
  const std::string bytes = protocol::encode_request(req);
  impl_->sock.send(zmq::buffer(bytes), zmq::send_flags::none);
}

// Hands every reply to requests `ids` to on_reply (their index, the reply) until each has had its
// final one. Throws WorkerError for the first error reply, TimeoutError.
void Client::receive(std::span<const uint64_t> ids,
                     const std::function<void(size_t, protocol::Reply)>& on_reply) {
  // The timeout is per message: a long stream is fine as long as chunks come. Heartbeats do not
  // extend it (a stuck engine still times out), but their absence ends the wait early: a worker
  // that says nothing for `liveness` is dead, not slow.
  using SteadyClock = std::chrono::steady_clock;
  const auto liveness = impl_->liveness;
  auto deadline = SteadyClock::now() + impl_->timeout;
  auto alive_until = liveness.count() > 0 ? SteadyClock::now() + liveness : deadline;
  size_t open = ids.size();
  while (open > 0) {
    const bool dead_first = alive_until < deadline;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::min(deadline, alive_until) - SteadyClock::now());
    zmq::pollitem_t item{impl_->sock.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::max(left, std::chrono::milliseconds(0)));
    if (!(item.revents & ZMQ_POLLIN)) {
      // The worker is gone or stuck. Start over on a fresh socket (at the next call) so that it
      // reaches a restarted worker without stale requests queued ahead of it.
      impl_->disconnect();
      if (dead_first) {
        throw TimeoutError("no reply and no heartbeat from " + endpoint_ + " for " +
                           std::to_string(liveness.count()) + " ms: the worker is gone");
      }
      throw TimeoutError("no reply from " + endpoint_ + " within " +
                         std::to_string(impl_->timeout.count()) + " ms");
    }
    zmq::message_t msg;
    (void)impl_->sock.recv(msg, zmq::recv_flags::none);
    protocol::Reply r = protocol::decode_reply(msg.to_string_view());
    if (liveness.count() > 0) alive_until = SteadyClock::now() + liveness;  // a sign of life
    if (r.heartbeat) continue;
    // Id 0: the answer to a request the worker could not read, which can only be one of ours.
    const auto it =
        r.id == 0 && ids.size() == 1 ? ids.begin() : std::find(ids.begin(), ids.end(), r.id);
    if (it == ids.end() && r.id != 0) continue;  // a late reply to an earlier, timed-out call
    if (!r.ok) throw WorkerError(r.code, r.message);
    if (it == ids.end()) continue;
    deadline = SteadyClock::now() + impl_->timeout;
    if (!r.more) --open;
    on_reply(static_cast<size_t>(it - ids.begin()), std::move(r));
  }
}

std::vector<GenerateResult> Client::generate_all(const std::vector<protocol::Input>& prompts,
                                                 const std::vector<uint64_t>& sessions,
                                                 const GenerateOptions& options) {
  if (!impl_->said_hello) hello();
  if (!sessions.empty() && sessions.size() != prompts.size()) {
    throw std::invalid_argument("generate_all: one session per prompt, or none");
  }
  std::vector<Request> reqs(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    reqs[i] = generate_request(prompts[i], options, sessions.empty() ? 0 : sessions[i]);
  }
  std::vector<GenerateResult> out;
  for (const protocol::Reply& r : call_all(reqs, state_of(options))) {
    out.push_back(generate_result(r));
  }
  return out;
}

Tensor Client::to_tensor(const Value& v) {
  const protocol::TensorDesc d = protocol::parse_tensor(v);
  Tensor t;
  t.shape = d.shape;
  if (d.shm) {
    if (!impl_->reader) throw std::runtime_error("worker sent a shm tensor to an unmapped client");
    std::span<const float> f;
    try {
      impl_->reader->check_intact();
      f = protocol::tensor_floats(d, &impl_->reader->view());
    } catch (const protocol::ProtocolError& e) {
      // Not in our mapping: maybe a new worker with a new ring. Say hello again next time, and
      // hand the lease back (unknown ids are ignored in piggy-backed releases).
      if (e.code() == protocol::ErrorCode::kUnknownLease) impl_->forget_ring();
      std::lock_guard lock(impl_->pending->mu);
      impl_->pending->ids.push_back(d.shm->lease);
      throw;
    }
    t.ptr_ = f.data();
    t.count_ = f.size();
    t.lease_ = std::make_shared<LeaseHandle>(*d.shm, impl_->reader, impl_->pending);
  } else {
    const std::span<const float> f = protocol::tensor_floats(d, nullptr);  // checks the count
    t.owned_.resize(f.size());
    std::memcpy(t.owned_.data(), d.data->data(), f.size_bytes());
    t.ptr_ = t.owned_.data();
    t.count_ = t.owned_.size();
  }
  return t;
}

Value Client::hello() {
  Request req;
  req.op = Op::kHello;
  Value body = call(req).body;
  // Workers that heartbeat say how often; an absurd interval is capped at an hour.
  const Value* hb = body.find("heartbeat_ms");
  const uint64_t hb_ms =
      hb != nullptr ? std::min<uint64_t>(hb->as_uint("heartbeat_ms"), 3600000) : 0;
  impl_->liveness = std::chrono::milliseconds(hb_ms * protocol::kHeartbeatLiveness);
  if (!impl_->said_hello) {
    impl_->said_hello = true;
    if (!impl_->use_shm) return body;
    if (const Value* shm = body.find("shm"); shm != nullptr && !shm->is_nil()) {
      try {
        impl_->reader = protocol::ShmReader::open(need(*shm, "name").as_str());
      } catch (const std::exception&) {
        impl_->reader.reset();  // another host or user: tensors come inline
      }
    }
  }
  return body;
}

Value Client::info() {
  Request req;
  req.op = Op::kInfo;
  return call(req).body;
}

Value Client::stats() {
  Request req;
  req.op = Op::kStats;
  return need(call(req).body, "stats");
}

std::vector<int32_t> Client::tokenize(const std::string& text) {
  Request req;
  req.op = Op::kTokenize;
  req.inputs.push_back(protocol::Input{text, {}});
  return int_list(&need(call(req).body, "tokens"));
}

std::string Client::detokenize(const std::vector<int32_t>& tokens) {
  Request req;
  req.op = Op::kDetokenize;
  req.inputs.push_back(protocol::Input{std::nullopt, tokens});
  return need(call(req).body, "text").as_str();
}

Request Client::generate_request(const protocol::Input& prompt, const GenerateOptions& options,
                                 uint64_t session) const {
  Request req;
  req.op = Op::kGenerate;
  req.inputs.push_back(prompt);
  req.sampling = options.sampling;
  req.return_state = options.return_state;
  req.session = session;  // options.state goes with send(): no copy into the request
  return req;
}

GenerateResult Client::generate_result(const protocol::Reply& r) {
  GenerateResult g;
  g.tokens = int_list(r.body.find("tokens"));
  if (const Value* t = r.body.find("text")) g.text = t->as_str();
  g.finish_reason = need(r.body, "finish_reason").as_str();
  g.prompt_tokens = need(r.body, "prompt_tokens").as_uint();
  g.completion_tokens = need(r.body, "completion_tokens").as_uint();
  g.seed = need(r.body, "seed").as_uint();
  if (const Value* s = r.body.find("state")) g.state = to_tensor(*s);
  return g;
}

GenerateResult Client::generate(const protocol::Input& prompt, const GenerateOptions& options,
                                const std::function<void(const Chunk&)>& on_chunk,
                                uint64_t session) {
  if (!impl_->said_hello) hello();
  Request req = generate_request(prompt, options, session);
  req.stream = static_cast<bool>(on_chunk);
  auto more = [&](const protocol::Reply& r) {
    Chunk c;
    c.tokens = int_list(r.body.find("tokens"));
    if (const Value* t = r.body.find("text")) c.text = t->as_str();
    on_chunk(c);
  };
  return generate_result(call_with_state(req, state_of(options), more));
}

Tensor Client::embed(const std::vector<protocol::Input>& inputs) {
  if (!impl_->said_hello) hello();
  Request req;
  req.op = Op::kEmbed;
  req.inputs = inputs;
  return to_tensor(need(call(req).body, "embeddings"));
}

uint64_t Client::session_open(std::optional<std::span<const float>> state) {
  Request req;
  req.op = Op::kSessionOpen;
  return need(call_with_state(req, state).body, "session").as_uint();
}

void Client::session_close(uint64_t session) {
  Request req;
  req.op = Op::kSessionClose;
  req.session = session;
  call(req);
}

uint64_t Client::session_fork(uint64_t session) {
  Request req;
  req.op = Op::kSessionFork;
  req.session = session;
  return need(call(req).body, "session").as_uint();
}

std::string Client::session_share(uint64_t session) {
  Request req;
  req.op = Op::kSessionShare;
  req.session = session;
  return need(call(req).body, "token").as_str("token");
}

void Client::session_unshare(uint64_t session) {
  Request req;
  req.op = Op::kSessionUnshare;
  req.session = session;
  call(req);
}

uint64_t Client::session_fork_shared(const std::string& token) {
  Request req;
  req.op = Op::kSessionFork;
  req.token = token;
  return need(call(req).body, "session").as_uint();
}

uint64_t Client::session_feed(uint64_t session, const protocol::Input& input) {
  Request req;
  req.op = Op::kSessionFeed;
  req.session = session;
  req.inputs.push_back(input);
  return need(call(req).body, "position").as_uint();
}

Tensor Client::session_state(uint64_t session) {
  if (!impl_->said_hello) hello();
  Request req;
  req.op = Op::kSessionState;
  req.session = session;
  return to_tensor(need(call(req).body, "state"));
}

void Client::session_set_state(uint64_t session, std::span<const float> state) {
  Request req;
  req.op = Op::kSessionSetState;
  req.session = session;
  call_with_state(req, state);
}

Tensor Client::session_embed(uint64_t session, const protocol::Input& input) {
  if (!impl_->said_hello) hello();
  Request req;
  req.op = Op::kEmbed;
  req.session = session;
  req.inputs.push_back(input);
  return to_tensor(need(call(req).body, "embeddings"));
}

ForwardResult Client::forward(const protocol::Input& input, const ForwardOptions& options) {
  if (!impl_->said_hello) hello();
  Request req;
  req.op = Op::kForward;
  req.inputs.push_back(input);
  req.output = options.output;
  req.session = options.session;
  req.return_state = options.return_state;
  const protocol::Reply r = call_with_state(req, state_of(options));
  ForwardResult f;
  f.output = to_tensor(need(r.body, "output"));
  f.n_tokens = need(r.body, "n_tokens").as_uint();
  if (const Value* p = r.body.find("position")) f.position = p->as_uint();
  if (const Value* s = r.body.find("state")) f.state = to_tensor(*s);
  return f;
}

void Client::flush_releases() {
  std::vector<uint64_t> ids;
  {
    std::lock_guard lock(impl_->pending->mu);
    ids.swap(impl_->pending->ids);
  }
  if (ids.empty()) return;
  Request req;
  req.op = Op::kRelease;
  req.leases = std::move(ids);
  try {
    call(req);
  } catch (const WorkerError&) {
    // Not ours any more (a restarted worker, a replaced ring): nothing left to release.
  }
}

}  // namespace rwkvd::client
