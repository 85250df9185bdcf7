#pragma once
// The worker's front: a ZeroMQ ROUTER socket. Each client (DEALER) sends one msgpack frame per
// request and may keep many in flight (replies carry the request id). The server thread
// decodes and validates, answers cheap ops itself (hello, info, stats, tokenize, release), hands
// the rest to the scheduler's engine thread, and places result tensors in the shared-memory
// ring (or inline) on the way out. States that requests name as shared-memory inputs are read
// by the StateReader's threads meanwhile (the client's later messages wait for them).
#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <zmq.hpp>

#include "engine/backend.h"
#include "protocol/shm_ring.h"
#include "worker/curve_auth.h"
#include "worker/endpoint.h"
#include "worker/job.h"
#include "worker/options.h"
#include "worker/scheduler.h"
#include "worker/state_reader.h"
#include "worker/stats.h"
#include "worker/text_codec.h"
#include "worker/timed_backend.h"

namespace rwkvd::worker {

struct ModelInfo {
  std::string name;
  std::string path;
  uint64_t file_bytes = 0;
};

class Server {
 public:
  Server(std::unique_ptr<engine::Backend> backend, std::shared_ptr<const TextCodec> codec,
         ServeOptions options, ModelInfo model);
  ~Server();

  // The shared-memory ring of `options` (null when shm_bytes is 0), after removing the segments
  // of dead workers and clients: made apart from bind() so that a worker can make it beside
  // loading its model (mapping 256 MiB takes ~100 ms). Throws std::runtime_error.
  static std::unique_ptr<protocol::ShmRing> make_ring(const ServeOptions& options);
  // Binds the socket with the ring make_ring() made of these options, or of the server's own;
  // throws std::runtime_error.
  void bind(std::unique_ptr<protocol::ShmRing> ring);
  void bind();
  // Serves until request_stop(); then fails in-flight requests, unlinks the socket and ring.
  void run();
  // Async-signal-safe.
  void request_stop() { stop_.store(true); }
  // Async-signal-safe: with drain_s, the first call drains (no new engine work; stops when
  // nothing is in flight or after drain_s), a second one stops at once; without, it stops.
  void request_drain() {
    if (opt_.drain_s == 0 || drain_.exchange(true)) stop_.store(true);
  }
  const std::string& endpoint() const { return opt_.endpoint; }
  const Stats& stats() const { return stats_; }

 private:
  void handle(const std::string& client, const std::string& body);
  void handle_request(const std::string& client, protocol::Request req);
  // handle_request, its errors answered.
  void dispatch(const std::string& client, protocol::Request req);
  // The requests whose shared-memory states the reader has read, then the messages their
  // clients sent meanwhile, in order.
  void finish_reads();
  // What a reader thread does to a request before it is handled: reads its shared-memory state,
  // tokenizes its texts (const: reader threads share it).
  void prepare_aside(protocol::Request& req) const;
  void wake();            // the server thread's poll returns (any thread)
  void post(Outgoing o);  // engine thread
  // A ring lease for a result the engine thread writes itself (Scheduler::Reserve); any thread.
  std::optional<protocol::ShmRing::Allocation> lease_for(const std::string& client, uint64_t bytes);
  void deliver(Outgoing o, bool force_inline);
  bool place_tensors(Outgoing& o, bool force_inline);
  // False where the message did not go out (the client is gone or not reading: dropped).
  bool send(const std::string& client, const protocol::Value& body);
  // A result's reply; the leases in one that cannot be sent are released.
  void send_reply(Outgoing& o);
  // Once a second: asks each client holding leases past the lease timeout whether it is still
  // there (a heartbeat), freeing the leases of one that is gone; replaces a truncated ring.
  void check_leases();
  bool reachable(const std::string& client);  // a heartbeat to it could be routed
  // The reply to send in place of `body` where it would take the client's queued reply bytes
  // past client_queue_bytes (an error for its id), else nullopt.
  std::optional<protocol::Value> over_queue_bytes(const std::string& client,
                                                  const protocol::Value& body, size_t bytes);
  // The client is gone (gone_for_good: unreachable) or has stopped reading (its queue is full):
  // drop its work and leases; sessions too when it is gone for good.
  void drop_client(const std::string& client, bool gone_for_good);
  void send_error(const std::string& client, uint64_t id, protocol::ErrorCode code,
                  const std::string& msg);
  void drain_outbox();
  void retry_parked(bool force);
  void send_heartbeats();
  // While draining: true once nothing is in flight or the drain's time is up (then stop).
  bool drained();
  protocol::Value hello_value() const;
  protocol::Value info_value() const;
  protocol::Value stats_value() const;

  std::unique_ptr<engine::Backend> backend_;
  std::unique_ptr<TimedBackend> timed_;  // backend_ as the scheduler calls it
  std::shared_ptr<const TextCodec> codec_;
  ServeOptions opt_;
  ModelInfo model_;
  Stats stats_;
  protocol::ModelShape shape_;
  std::unique_ptr<protocol::ShmRing> ring_;
  std::unique_ptr<Scheduler> scheduler_;
  // Clients with a state being read (server thread only), and the messages each sent meanwhile:
  // they wait, so that a client's requests take effect in the order it sent them.
  std::unordered_set<std::string> reading_;
  std::unordered_map<std::string, std::deque<std::string>> held_;

  zmq::context_t ctx_;
  std::unique_ptr<CurveAuth> auth_;  // for tcp (and ipc with --curve); before router_ binds
  zmq::socket_t router_;
  zmq::socket_t wake_pull_;
  zmq::socket_t wake_push_;  // used under outbox_mu_ by the engine and reader threads
  std::string wake_endpoint_;
  std::mutex outbox_mu_;
  std::deque<Outgoing> outbox_;
  // After the sockets and outbox_ it wakes through: destroyed (its threads joined) before them.
  std::unique_ptr<StateReader> reader_;
  struct Parked {
    Outgoing out;
    Clock::time_point deadline;
  };
  std::deque<Parked> parked_;  // waiting for ring space
  // Requests of each client queued or running (server thread only), for the per-client cap.
  std::unordered_map<std::string, uint32_t> inflight_;
  // Bytes of replies ZeroMQ holds for each client: counted up as a reply is queued, down (on
  // ZeroMQ's I/O thread) when it has been written out or dropped.
  std::unordered_map<std::string, std::shared_ptr<std::atomic<uint64_t>>> queued_bytes_;
  // Streams (client, id) that lost a chunk to the byte cap: the rest of them is not sent.
  std::set<std::pair<std::string, uint64_t>> cut_streams_;
  // Clients found to have stopped reading (a send failed with their queue full), until their
  // queue has emptied: stats clients.stalled counts each once a time it stops.
  std::unordered_set<std::string> stalled_;
  // When each client with requests in flight last got a message from us (for heartbeats).
  std::unordered_map<std::string, Clock::time_point> last_sent_;
  // Lease holders the last lease check could not reach (server thread only).
  std::vector<std::string> unreachable_;
  Clock::time_point last_drop_log_{};
  std::atomic<bool> stop_{false};
  std::atomic<bool> drain_{false};
  std::optional<Clock::time_point> drain_until_;  // set when the server thread starts draining
  bool bound_ = false;
  BoundSocket socket_file_;  // the ipc socket file bind() made: the only one stop() removes
};

}  // namespace rwkvd::worker
