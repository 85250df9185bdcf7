#include "worker/server.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "protocol/codec.h"
#include "protocol/shm_input.h"
#include "worker/endpoint.h"
#include "worker/request_log.h"

namespace rwkvd::worker {

using protocol::ErrorCode;
using protocol::Op;
using protocol::Value;

namespace {
constexpr const char* kServerVersion = "rwkvd 0.1.0";

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}
// Threads reading shared-memory states: a few clients' at once (each read uses several threads
// of its own for a large state, shm_input.cpp).
constexpr unsigned kStateReaders = 4;

}  // namespace

Server::Server(std::unique_ptr<engine::Backend> backend, std::shared_ptr<const TextCodec> codec,
               ServeOptions options, ModelInfo model)
    : backend_(std::move(backend)),
      codec_(std::move(codec)),
      opt_(std::move(options)),
      model_(std::move(model)),
      ctx_(1) {
  const auto& hp = backend_->hparams();
  shape_ = protocol::ModelShape{hp.n_vocab, hp.state_floats(), hp.n_embd};
  if (opt_.endpoint.empty()) opt_.endpoint = default_endpoint();
}

Server::~Server() {
  if (scheduler_) scheduler_->stop();
  if (bound_) remove_endpoint(socket_file_);
}

std::unique_ptr<protocol::ShmRing> Server::make_ring(const ServeOptions& options) {
  const size_t stale = protocol::ShmRing::remove_stale();
  if (stale > 0) spdlog::info("removed {} shared-memory segment(s) of dead workers", stale);
  const size_t inputs = protocol::remove_stale_shm_inputs();
  if (inputs > 0) spdlog::info("removed {} shared-memory input(s) of dead clients", inputs);
  if (options.shm_bytes == 0) return nullptr;
  protocol::ShmRing::Options ro;
  ro.bytes = options.shm_bytes;
  ro.n_slots = options.shm_slots;
  ro.lease_timeout = std::chrono::seconds(options.lease_timeout_s);
  auto ring = protocol::ShmRing::create(ro);
  spdlog::info("shared-memory ring /dev/shm/{} ({} MiB, {} slots)", ring->name(),
               ring->total_bytes() >> 20, ring->n_slots());
  return ring;
}

void Server::bind() {
  bind(make_ring(opt_));
}

void Server::bind(std::unique_ptr<protocol::ShmRing> ring) {
  prepare_endpoint(opt_.endpoint, opt_.allow_remote);
  ring_ = std::move(ring);
  // CURVE: always over tcp (other users of the host, or other hosts, can reach it), over ipc
  // when asked (its directory already keeps other users out).
  if ((opt_.curve || opt_.endpoint.rfind("tcp://", 0) == 0) && !auth_) {
    auth_ = std::make_unique<CurveAuth>(ctx_);
    spdlog::info("CURVE: server key {}, {} client key(s) admitted", auth_->public_key(),
                 auth_->n_clients());
  }
  router_ = zmq::socket_t(ctx_, zmq::socket_type::router);
  if (auth_) auth_->apply(router_);
  // Mandatory: a send to a vanished client fails (EHOSTUNREACH) and one to a client whose queue
  // is full fails (EAGAIN) instead of being dropped silently; both tell us to drop its work.
  router_.set(zmq::sockopt::router_mandatory, 1);
  // A client that reconnects with its identity (after a timeout) takes its old place over,
  // keeping its sessions and leases.
  router_.set(zmq::sockopt::router_handover, 1);
  router_.set(zmq::sockopt::linger, 0);
  // Per client: replies queued (bounds what a client that never reads costs us) and requests
  // queued (past that ZeroMQ stops reading its socket: back-pressure, not memory).
  router_.set(zmq::sockopt::sndhwm, static_cast<int>(opt_.client_queue));
  router_.set(zmq::sockopt::rcvhwm, 1000);
  // A transport cap (zmq drops a peer that sends more) well above the protocol's own limit, which
  // gets a readable error reply.
  router_.set(zmq::sockopt::maxmsgsize,
              static_cast<int64_t>(opt_.limits.max_message_bytes * 2 + 4096));
  const mode_t old = ::umask(077);  // the socket file is created 0600, no window
  try {
    router_.bind(opt_.endpoint);
  } catch (...) {
    ::umask(old);
    throw;
  }
  ::umask(old);
  bound_ = true;
  socket_file_ = secure_endpoint(opt_.endpoint);
  if (opt_.endpoint.rfind("tcp://", 0) == 0 && opt_.endpoint.back() == '*') {
    opt_.endpoint = router_.get(zmq::sockopt::last_endpoint);
  }
  wake_endpoint_ = "inproc://wake-" + protocol::random_hex(4);
  wake_pull_ = zmq::socket_t(ctx_, zmq::socket_type::pull);
  wake_pull_.bind(wake_endpoint_);
  wake_push_ = zmq::socket_t(ctx_, zmq::socket_type::push);
  wake_push_.set(zmq::sockopt::linger, 0);
  wake_push_.connect(wake_endpoint_);
  timed_ = std::make_unique<TimedBackend>(*backend_, stats_);
  scheduler_ = std::make_unique<Scheduler>(
      *timed_, codec_.get(), opt_, stats_, [this](Outgoing o) { post(std::move(o)); },
      [this](const std::string& client, uint64_t bytes) { return lease_for(client, bytes); });
  scheduler_->start();
  reader_ = std::make_unique<StateReader>(
      kStateReaders, [this] { wake(); }, [this](protocol::Request& r) { prepare_aside(r); });
  spdlog::info("listening on {}", opt_.endpoint);
}

void Server::wake() {
  std::lock_guard lock(outbox_mu_);
  wake_push_.send(zmq::buffer("w", 1), zmq::send_flags::dontwait);
}

void Server::post(Outgoing o) {
  std::lock_guard lock(outbox_mu_);
  const bool was_empty = outbox_.empty();
  outbox_.push_back(std::move(o));
  if (was_empty) wake_push_.send(zmq::buffer("w", 1), zmq::send_flags::dontwait);
}

namespace {

// A reply handed to ZeroMQ without a copy; its bytes count in the client's queue until ZeroMQ
// frees it (written out, or dropped with the connection).
struct QueuedReply {
  std::string bytes;
  std::shared_ptr<std::atomic<uint64_t>> queued;
};

void free_queued_reply(void* /*data*/, void* hint) {
  auto* r = static_cast<QueuedReply*>(hint);
  r->queued->fetch_sub(r->bytes.size());
  delete r;
}

}  // namespace

std::optional<Value> Server::over_queue_bytes(const std::string& client, const Value& body,
                                              size_t bytes) {
  const Value* id = body.find("id");
  if (id == nullptr || id->as_uint() == 0) return std::nullopt;  // heartbeats are tiny
  const auto key = std::make_pair(client, id->as_uint());
  const Value* more = body.find("more");
  const bool final = more == nullptr || !more->as_bool();
  if (cut_streams_.contains(key)) {  // its error went out already
    if (final) cut_streams_.erase(key);
    return Value();  // nothing to send
  }
  if (const Value* ok = body.find("ok"); ok != nullptr && !ok->as_bool()) {
    return std::nullopt;  // errors are small, and this one may be the byte cap's own
  }
  const auto at = queued_bytes_.find(client);
  const uint64_t queued = at != queued_bytes_.end() ? at->second->load() : 0;
  // One reply always goes to a client with nothing queued, however large.
  if (queued == 0 || queued + bytes <= opt_.client_queue_bytes) return std::nullopt;
  stats_.client_event("replies_dropped");
  if (!final) cut_streams_.insert(key);
  return protocol::error_reply(
      id->as_uint(), ErrorCode::kQuotaExceeded,
      "this reply (" + std::to_string(bytes) + " bytes) was dropped: " + std::to_string(queued) +
          " bytes of replies wait for this client to read them (--client-queue-bytes " +
          std::to_string(opt_.client_queue_bytes) + ")");
}

bool Server::send(const std::string& client, const Value& body) {
  std::string bytes = protocol::encode(body);
  if (auto instead = over_queue_bytes(client, body, bytes.size())) {
    // Not the reply: its leases go back (send_reply), the error goes in its place.
    if (instead->kind() == Value::Kind::kMap) send(client, *instead);
    return false;
  }
  if (const Value* ok = body.find("ok"); ok != nullptr && !ok->as_bool()) {
    const Value* code = body.find("error")->find("code");
    stats_.count_error(static_cast<ErrorCode>(code->as_uint()));
  }
  auto& queued = queued_bytes_[client];
  if (!queued) queued = std::make_shared<std::atomic<uint64_t>>(0);
  if (queued->load() == 0) stalled_.erase(client);  // it has read all it was sent
  try {
    auto r1 =
        router_.send(zmq::buffer(client), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    if (!r1) {
      drop_client(client, false);  // its queue is full: it has stopped reading
      return false;
    }
    auto* r = new QueuedReply{std::move(bytes), queued};
    queued->fetch_add(r->bytes.size());
    zmq::message_t m(r->bytes.data(), r->bytes.size(), free_queued_reply, r);
    (void)router_.send(m, zmq::send_flags::dontwait);
    if (auto it = last_sent_.find(client); it != last_sent_.end()) it->second = Clock::now();
    return true;
  } catch (const zmq::error_t& e) {
    if (e.num() == EHOSTUNREACH) {
      drop_client(client, true);
    } else {
      spdlog::warn("send failed: {}", e.what());
    }
  }
  return false;
}

void Server::send_reply(Outgoing& o) {
  if (o.final) {
    stats_.record_latency(o.op, ms_since(o.received));
    log_replied(o.client, o.id, o.op, ms_since(o.received), o.body);
  }
  if (send(o.client, o.body) || !ring_) return;
  // Never seen by its client, which cannot release them: the reply's leases go back now.
  for (const auto& [key, v] : o.body.as_map()) {
    const Value* shm = v.find("shm");  // find() is null for what is not a map
    const Value* lease = shm != nullptr ? shm->find("lease") : nullptr;
    if (lease != nullptr && lease->kind() == Value::Kind::kUint) {
      ring_->release(lease->as_uint(), o.client);
    }
  }
}

bool Server::reachable(const std::string& client) {
  // A heartbeat that cannot be routed: the client is not connected. One that finds the client's
  // queue full leaves it alone: it is there, only not reading.
  try {
    if (router_.send(zmq::buffer(client), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
      (void)router_.send(zmq::buffer(protocol::encode(protocol::heartbeat_message())),
                         zmq::send_flags::dontwait);
    }
    stats_.shm_event("owner_checks");
    return true;
  } catch (const zmq::error_t& e) {
    return e.num() != EHOSTUNREACH;
  }
}

void Server::check_leases() {
  // Unreachable at the last check as well (a second apart): gone, and its leases with it. Once
  // is not enough: a client replacing its socket (after a timeout) is briefly not connected.
  std::vector<std::string> missing;
  missing.swap(unreachable_);
  for (const std::string& client : missing) {
    if (ring_->leases_of(client) > 0 && !reachable(client)) drop_client(client, true);
  }
  for (const std::string& client : ring_->owners_to_check()) {
    if (!reachable(client)) unreachable_.push_back(client);
  }
  if (!ring_->damaged()) return;
  // Another process truncated the segment (what it held is gone): a new one, whose name the
  // clients learn from their next hello; the leases of the old one answer unknown_lease.
  try {
    const std::string old = ring_->name();
    const size_t dropped = ring_->recreate();
    stats_.shm_event("recreated");
    spdlog::warn(
        "shared-memory ring /dev/shm/{} was truncated by another process; replaced by "
        "/dev/shm/{} ({} lease(s) lost)",
        old, ring_->name(), dropped);
  } catch (const std::exception& e) {
    spdlog::error("replacing the damaged shared-memory ring: {}", e.what());
  }
}

void Server::drop_client(const std::string& client, bool gone_for_good) {
  if (gone_for_good) {
    stats_.client_event("gone");
    stalled_.erase(client);
    cut_streams_.erase(cut_streams_.lower_bound({client, 0}),
                       cut_streams_.upper_bound({client, UINT64_MAX}));
  } else if (stalled_.insert(client).second) {
    stats_.client_event("stalled");  // once, not for every reply it does not take
  }
  if (Clock::now() - last_drop_log_ > std::chrono::seconds(1)) {  // one line a second at most
    last_drop_log_ = Clock::now();
    spdlog::warn("a client {}", gone_for_good ? "vanished; dropping its work and leases"
                                              : "stopped reading (reply queue full); dropping "
                                                "its work");
  }
  // A client that only stopped reading keeps its leases: it may still read the arrays it has.
  if (ring_ && gone_for_good) ring_->release_owner(client);
  scheduler_->client_gone(client, gone_for_good);
  inflight_.erase(client);
  last_sent_.erase(client);
}

void Server::send_error(const std::string& client, uint64_t id, ErrorCode code,
                        const std::string& msg) {
  spdlog::debug("reply {} to {}: {} ({})", id, client_tag(client), protocol::error_name(code), msg);
  send(client, protocol::error_reply(id, code, msg));
}

bool Server::place_tensors(Outgoing& o, bool force_inline) {
  std::vector<std::pair<std::string, Value>> placed;
  std::vector<uint64_t> leases;
  for (auto& [name, t] : o.tensors) {
    const uint64_t bytes = t.data.size() * sizeof(float);
    const bool fits = ring_ && bytes <= ring_->data_bytes();
    // A client at its lease cap gets the rest inline: it cannot fill the ring for the others.
    const bool quota = ring_ && ring_->leases_of(o.client) >= opt_.max_leases_per_client;
    if (o.shm_ok && fits && quota && !force_inline) stats_.shm_event("inline_quota");
    if (o.shm_ok && fits && !quota && !force_inline) {
      auto a = ring_->allocate(bytes, o.client);
      if (!a) {
        for (uint64_t l : leases) ring_->release(l, o.client);
        return false;  // park: the ring may drain within shm_wait_ms
      }
      std::memcpy(a->data, t.data.data(), bytes);
      leases.push_back(a->ref.lease);
      placed.emplace_back(name, protocol::tensor_shm(t.shape, a->ref));
      stats_.shm_event("allocations");
    } else {
      if (o.shm_ok && ring_ && !fits) stats_.shm_event("inline_too_large");
      placed.emplace_back(name, protocol::tensor_inline(t.shape, t.data.data(), t.data.size()));
    }
  }
  for (auto& [name, v] : placed) o.body.set(name, std::move(v));
  for (auto& [name, v] : o.placed) o.body.set(name, std::move(v));
  o.tensors.clear();
  o.placed.clear();
  return true;
}

std::optional<protocol::ShmRing::Allocation> Server::lease_for(const std::string& client,
                                                               uint64_t bytes) {
  // The rules of place_tensors(): the ring holds it and the client is under its lease cap (else
  // the tensor takes that path: inline, or parked while the ring is full). The server thread may
  // take a lease of the same client between the check and the allocation: the cap holds to one.
  if (!ring_ || bytes > ring_->data_bytes() ||
      ring_->leases_of(client) >= opt_.max_leases_per_client) {
    return std::nullopt;
  }
  auto a = ring_->allocate(bytes, client);
  if (a) stats_.shm_event("allocations");
  return a;
}

void Server::deliver(Outgoing o, bool force_inline) {
  if ((!o.tensors.empty() || !o.placed.empty()) && !place_tensors(o, force_inline)) {
    stats_.shm_event("waits");
    parked_.push_back({std::move(o), Clock::now() + std::chrono::milliseconds(opt_.shm_wait_ms)});
    return;
  }
  send_reply(o);
}

void Server::retry_parked(bool force) {
  const auto now = Clock::now();
  while (!parked_.empty()) {
    Parked& p = parked_.front();
    const bool late = force || now >= p.deadline;
    if (!place_tensors(p.out, late)) break;
    if (late) stats_.shm_event("inline_fallbacks");
    send_reply(p.out);
    parked_.pop_front();
  }
}

void Server::send_heartbeats() {
  if (opt_.heartbeat_ms == 0) return;
  const auto now = Clock::now();
  const auto every = std::chrono::milliseconds(opt_.heartbeat_ms);
  std::vector<std::string> due;
  for (auto it = last_sent_.begin(); it != last_sent_.end();) {
    if (!inflight_.contains(it->first)) {
      it = last_sent_.erase(it);  // nothing in flight: nobody waits on us
      continue;
    }
    if (now - it->second >= every) due.push_back(it->first);
    ++it;
  }
  // send() may drop a client (its queue is full: it stopped reading), which edits the maps.
  for (const auto& client : due) {
    last_sent_[client] = now;
    send(client, protocol::heartbeat_message());
  }
}

void Server::drain_outbox() {
  std::deque<Outgoing> out;
  {
    std::lock_guard lock(outbox_mu_);
    out.swap(outbox_);
  }
  for (auto& o : out) {
    if (o.final) {
      auto it = inflight_.find(o.client);
      if (it != inflight_.end() && --it->second == 0) inflight_.erase(it);
    }
    if (!parked_.empty() && !o.tensors.empty()) {
      parked_.push_back({std::move(o), Clock::now() + std::chrono::milliseconds(opt_.shm_wait_ms)});
    } else {
      deliver(std::move(o), false);
    }
  }
}

Value Server::hello_value() const {
  const auto& hp = backend_->hparams();
  const auto& l = opt_.limits;
  Value::Map limits{{"max_message_bytes", Value(l.max_message_bytes)},
                    {"max_tokens", Value(l.max_tokens)},
                    {"max_batch", Value(l.max_batch)},
                    {"max_text_bytes", Value(l.max_text_bytes)},
                    {"max_new_tokens", Value(l.max_new_tokens)},
                    {"max_stop", Value(l.max_stop)},
                    {"max_stop_bytes", Value(l.max_stop_bytes)},
                    {"max_leases", Value(l.max_leases)},
                    {"max_shm_input_bytes", Value(l.max_shm_input_bytes)},
                    {"max_sessions_per_client", Value(opt_.max_sessions_per_client)},
                    {"max_inflight_per_client", Value(opt_.max_inflight_per_client)},
                    {"max_leases_per_client", Value(opt_.max_leases_per_client)}};
  Value::Map model{{"name", Value(model_.name)},
                   {"n_vocab", Value(hp.n_vocab)},
                   {"n_embd", Value(hp.n_embd)},
                   {"n_layer", Value(hp.n_layer)},
                   {"head_size", Value(hp.head_size)},
                   {"state_floats", Value(hp.state_floats())},
                   {"state_shape", Value(Value::Array{Value(hp.n_layer), Value(hp.head_size + 2),
                                                      Value(hp.n_embd)})},
                   {"has_tokenizer", Value(codec_ != nullptr)}};
  Value shm;
  if (ring_)
    shm = Value(Value::Map{{"name", Value(ring_->name())}, {"bytes", Value(ring_->total_bytes())}});
  return Value(Value::Map{{"protocol", Value(protocol::kProtocolVersion)},
                          {"server", Value(kServerVersion)},
                          {"heartbeat_ms", Value(opt_.heartbeat_ms)},
                          {"shm", std::move(shm)},
                          {"limits", Value(std::move(limits))},
                          {"model", Value(std::move(model))}});
}

Value Server::info_value() const {
  Value v = hello_value();
  const auto& hp = backend_->hparams();
  const uint64_t state_bytes = hp.state_floats() * sizeof(float);
  v.set("device", Value(backend_->device_name()));
  Value::Array features;
  for (const std::string& f : backend_->device_features()) features.emplace_back(f);
  v.set("device_features", Value(std::move(features)));
  v.set("endpoint", Value(opt_.endpoint));
  v.set("pid", Value(static_cast<uint64_t>(::getpid())));
  v.set("model_path", Value(model_.path));
  const engine::LoadStats load = backend_->load_stats();
  v.set("load_ms", Value(load.usable_ms));
  v.set("memory", Value(Value::Map{{"model_file_bytes", Value(model_.file_bytes)},
                                   {"weight_bytes", Value(load.weight_bytes)},
                                   {"scratch_bytes", Value(load.scratch_bytes)},
                                   {"state_bytes", Value(state_bytes)},
                                   {"n_slots", Value(backend_->n_slots())},
                                   {"slots_bytes", Value(state_bytes * backend_->n_slots())},
                                   {"prefix_cache_budget_bytes", Value(opt_.prefix_cache_bytes)},
                                   {"shm_bytes", Value(ring_ ? ring_->total_bytes() : 0)}}));
  v.set("options", Value(Value::Map{{"coalesce_embeds", Value(opt_.coalesce_embeds)},
                                    {"batch_window_us", Value(opt_.batch_window_us)},
                                    {"join_window_us", Value(opt_.join_window_us)},
                                    {"embed_token_budget", Value(opt_.embed_token_budget)},
                                    {"prefill_chunk", Value(opt_.prefill_chunk)},
                                    {"prefill_chunk_alone", Value(opt_.prefill_chunk_alone)},
                                    {"step_token_budget", Value(opt_.step_token_budget)},
                                    {"fair_quantum_steps", Value(opt_.fair_quantum_steps)},
                                    {"session_idle_s", Value(opt_.session_idle_s)},
                                    {"lease_timeout_s", Value(opt_.lease_timeout_s)},
                                    {"heartbeat_ms", Value(opt_.heartbeat_ms)},
                                    {"client_queue", Value(opt_.client_queue)},
                                    {"client_queue_bytes", Value(opt_.client_queue_bytes)}}));
  return v;
}

Value Server::stats_value() const {
  Value::Map shm;
  if (ring_) {
    shm = {{"bytes", Value(ring_->data_bytes())},
           {"bytes_in_use", Value(ring_->bytes_in_use())},
           {"leases", Value(ring_->leases_in_use())},
           {"parked", Value(parked_.size())}};
  }
  Value v = stats_.to_value(std::move(shm));
  uint64_t queued = 0;
  for (const auto& [client, bytes] : queued_bytes_) queued += bytes->load();
  v.set("reply_queue_bytes", Value(queued));
  return v;
}

void Server::handle(const std::string& client, const std::string& body) {
  if (reading_.contains(client)) {  // after the request whose state is being read
    std::deque<std::string>& held = held_[client];
    if (held.size() >= opt_.max_inflight_per_client) {
      uint64_t id = 0;
      try {
        id = protocol::decode_request(body, opt_.limits, protocol::ShmStates::kLeave).id;
      } catch (const protocol::RequestError& e) {
        id = e.id();
      }
      send_error(client, id, ErrorCode::kQuotaExceeded,
                 "this client has " + std::to_string(held.size()) +
                     " requests waiting behind one whose state is being read "
                     "(--max-inflight-per-client); wait for some replies");
      return;
    }
    held.push_back(body);
    return;
  }
  protocol::Request req;
  try {
    req = protocol::decode_request(body, opt_.limits, protocol::ShmStates::kLeave);
  } catch (const protocol::RequestError& e) {
    send_error(client, e.id(), e.code(), e.what());
    return;
  } catch (const std::exception& e) {  // std::bad_alloc: an error reply, not the end of us
    spdlog::error("decoding a request: {}", e.what());
    send_error(client, 0, ErrorCode::kInternal, e.what());
    return;
  }
  stats_.count_request(req.op);
  log_received(client, req, body.size());
  if (req.state_was_shm) stats_.shm_event("input_states");
  // Piggy-backed releases first: the client's memory is free before its next result needs it.
  // Leniently: a lease no longer held (its ring replaced, say) is no error here.
  if (ring_) {
    for (uint64_t l : req.release) ring_->release(l, client);
  }
  if (req.state_shm) {
    // Checked before any read: a request naming 1 GiB for a 264 KiB state costs nothing.
    const uint64_t want = shape_.state_floats * sizeof(float);
    if (req.state_shm->bytes != want) {
      send_error(client, req.id, ErrorCode::kBadState,
                 "state: shared-memory input of " + std::to_string(req.state_shm->bytes) +
                     " bytes; this model's state is " + std::to_string(want) + " bytes");
      return;
    }
  }
  if (req.state_shm || text_bytes(req) > kTokenizeAsideBytes) {
    reading_.insert(client);
    reader_->submit(client, std::move(req));
    return;
  }
  dispatch(client, std::move(req));
}

void Server::dispatch(const std::string& client, protocol::Request req) {
  const uint64_t id = req.id;
  try {
    handle_request(client, std::move(req));
  } catch (const protocol::ProtocolError& e) {
    send_error(client, id, e.code(), e.what());
  } catch (const std::exception& e) {
    spdlog::error("request {}: {}", id, e.what());
    send_error(client, id, ErrorCode::kInternal, e.what());
  }
}

void Server::prepare_aside(protocol::Request& req) const {
  protocol::read_shm_state(req);
  if (req.op == Op::kTokenize) {
    if (!codec_) return;  // handle_request says so
    protocol::Input& in = req.inputs.front();
    in.tokens = codec_->encode(*in.text);
    in.text.reset();
  } else if (req.op != Op::kDetokenize) {
    tokenize_inputs(req, codec_.get(), opt_.limits.max_tokens);
  }
}

void Server::finish_reads() {
  for (StateReader::Done& d : reader_->take()) {
    reading_.erase(d.client);
    stats_.record_latency("shm_state_read", d.read_ms);
    if (d.error) {
      send_error(d.client, d.req.id, *d.error, d.message);
    } else {
      dispatch(d.client, std::move(d.req));
    }
    const auto held = held_.find(d.client);
    if (held == held_.end()) continue;
    while (!held->second.empty() && !reading_.contains(d.client)) {
      const std::string body = std::move(held->second.front());
      held->second.pop_front();
      handle(d.client, body);
    }
    if (held->second.empty()) held_.erase(held);
  }
}

void Server::handle_request(const std::string& client, protocol::Request req) {
  const auto received = Clock::now();
  auto reply = [&](Value v) {
    stats_.record_latency(req.op, ms_since(received));
    log_replied(client, req.id, req.op, ms_since(received), v);
    send(client, v);
  };
  Value ok = protocol::ok_reply(req.id);
  switch (req.op) {
    case Op::kHello:
    case Op::kInfo: {
      Value v = req.op == Op::kHello ? hello_value() : info_value();
      for (auto& [k, val] : v.as_map_mut()) ok.set(k, std::move(val));
      reply(std::move(ok));
      return;
    }
    case Op::kStats: {
      ok.set("stats", stats_value());
      reply(std::move(ok));
      return;
    }
    case Op::kRelease:
    case Op::kRetain: {
      std::vector<uint64_t> unknown;
      for (uint64_t l : req.leases) {
        const bool done = ring_ && (req.op == Op::kRelease ? ring_->release(l, client)
                                                           : ring_->retain(l, client));
        if (!done) unknown.push_back(l);
      }
      if (!unknown.empty()) {
        throw protocol::ProtocolError(ErrorCode::kUnknownLease,
                                      std::to_string(unknown.size()) +
                                          " lease(s) not held by this client, e.g. " +
                                          std::to_string(unknown.front()));
      }
      ok.set("count", Value(req.leases.size()));
      reply(std::move(ok));
      return;
    }
    case Op::kTokenize:
    case Op::kDetokenize: {
      if (!codec_)
        throw protocol::ProtocolError(ErrorCode::kUnsupported, "this model has no tokenizer");
      if (req.op == Op::kTokenize) {
        const protocol::Input& in = req.inputs.front();  // tokenized aside where it was large
        const auto ids = in.text ? codec_->encode(*in.text) : in.tokens;
        ok.set("tokens", Value(Value::Array(ids.begin(), ids.end())));
      } else {
        protocol::validate_tokens(req.inputs.front().tokens, shape_.n_vocab);
        ok.set("text", Value(codec_->decode(req.inputs.front().tokens)));
      }
      reply(std::move(ok));
      return;
    }
    default:
      break;
  }
  if (drain_.load() && req.op != Op::kCancel) {
    throw protocol::ProtocolError(ErrorCode::kShuttingDown,
                                  "the worker is draining: it finishes the requests it has and "
                                  "takes no new ones");
  }
  // Everything else runs on the engine thread; texts are tokenized here (large ones were, on a
  // reader thread: handle()).
  tokenize_inputs(req, codec_.get(), opt_.limits.max_tokens);
  protocol::validate_for_model(req, shape_, opt_.limits);
  uint32_t& inflight = inflight_[client];
  if (inflight >= opt_.max_inflight_per_client && req.op != Op::kCancel) {
    throw protocol::ProtocolError(ErrorCode::kQuotaExceeded,
                                  "this client has " + std::to_string(inflight) +
                                      " requests in flight (--max-inflight-per-client); wait "
                                      "for some replies");
  }
  if (!scheduler_->submit(Job{client, std::move(req), received})) {
    if (inflight == 0) inflight_.erase(client);
    if (stop_.load())
      throw protocol::ProtocolError(ErrorCode::kShuttingDown, "the worker is shutting down");
    throw protocol::ProtocolError(ErrorCode::kBusy, "request queue is full; retry later");
  }
  inflight += 1;
  // The clock of its heartbeats starts now: a reply within heartbeat_ms needs none.
  if (opt_.heartbeat_ms > 0) last_sent_.try_emplace(client, Clock::now());
}

bool Server::drained() {
  const auto now = Clock::now();
  if (!drain_until_) {
    drain_until_ = now + std::chrono::seconds(opt_.drain_s);
    uint64_t n = 0;
    for (const auto& [client, k] : inflight_) n += k;
    spdlog::info(
        "draining: {} request(s) in flight; no new work; stopping when they are done, "
        "in {} s at most",
        n, opt_.drain_s);
  }
  if (inflight_.empty() && parked_.empty() && reading_.empty()) {
    spdlog::info("drained: every request finished");
    return true;
  }
  if (now < *drain_until_) return false;
  spdlog::warn("drain time ({} s) is up: failing what is still in flight", opt_.drain_s);
  return true;
}

void Server::run() {
  if (!bound_) bind();
  auto last_lease_check = Clock::now();
  auto last_prune = Clock::now();
  // Wake often enough to keep heartbeats within about half an interval of their time.
  const int64_t poll_ms =
      opt_.heartbeat_ms > 0 ? std::clamp<int64_t>(opt_.heartbeat_ms / 2, 1, 100) : 100;
  while (!stop_.load()) {
    zmq::pollitem_t items[] = {{router_.handle(), 0, ZMQ_POLLIN, 0},
                               {wake_pull_.handle(), 0, ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, 2, std::chrono::milliseconds(parked_.empty() ? poll_ms : 1));
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;  // a signal: the loop condition sees stop_
      throw;
    }
    if (items[0].revents & ZMQ_POLLIN) {
      for (int i = 0; i < 1024; ++i) {
        zmq::message_t id, body;
        if (!router_.recv(id, zmq::recv_flags::dontwait)) break;
        std::string client = id.to_string();
        std::vector<std::string> frames;
        while (router_.get(zmq::sockopt::rcvmore)) {
          zmq::message_t m;
          (void)router_.recv(m, zmq::recv_flags::none);
          frames.push_back(m.to_string());
        }
        // A DEALER sends one frame; a REQ socket puts an empty delimiter first.
        if (frames.size() == 2 && frames[0].empty()) frames.erase(frames.begin());
        if (frames.size() != 1) {
          send_error(client, 0, ErrorCode::kBadMessage, "expected exactly one msgpack frame");
          continue;
        }
        try {
          handle(client, frames[0]);
          // Replies the engine thread posted meanwhile go now, not after every waiting message
          // is handled: when reading states was part of that, six clients opening sessions at
          // once got their replies all together after the last one's read (H100, 2.9B: ~80 ms).
          drain_outbox();
        } catch (const std::exception& e) {  // e.g. bad_alloc encoding a reply: keep serving
          spdlog::error("handling a request: {}", e.what());
        }
      }
    }
    if (items[1].revents & ZMQ_POLLIN) {
      zmq::message_t m;
      while (wake_pull_.recv(m, zmq::recv_flags::dontwait)) {
      }
    }
    try {
      finish_reads();
      drain_outbox();
      retry_parked(false);
      send_heartbeats();
    } catch (const std::exception& e) {
      spdlog::error("sending replies: {}", e.what());
    }
    if (drain_.load() && drained()) break;
    if (ring_ && Clock::now() - last_lease_check > std::chrono::seconds(1)) {
      last_lease_check = Clock::now();
      check_leases();
    }
    if (Clock::now() - last_prune > std::chrono::seconds(1)) {
      last_prune = Clock::now();
      std::erase_if(queued_bytes_, [](const auto& kv) {
        return kv.second.use_count() == 1;  // no reply of the client's is queued
      });
    }
  }
  spdlog::info("stopping: failing in-flight requests");
  scheduler_->stop();
  // Requests whose states were being read, and what their clients sent after them, are
  // answered too (the stopped scheduler refuses them: shutting_down).
  // (A held message may itself name a state: until no client waits on a read.)
  do {
    reader_->drain();
    try {
      finish_reads();
    } catch (const std::exception& e) {
      spdlog::error("answering requests at stop: {}", e.what());
      break;
    }
  } while (!reading_.empty());
  reader_.reset();
  drain_outbox();
  retry_parked(true);
  router_.set(zmq::sockopt::linger, 1000);  // let the shutting_down replies out
  router_.close();
  remove_endpoint(socket_file_);
  bound_ = false;
  ring_.reset();  // unlinks the segment
  spdlog::info("stopped");
}

}  // namespace rwkvd::worker
