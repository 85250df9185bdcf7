#pragma once
// The engine thread: the only code that touches the Backend. It takes validated jobs from the
// server thread and turns them into as few Backend::run calls as it can:
//  - embed: requests that arrive within the batch window (or until the token budget fills) run
//    as ONE batched run in embedding mode, then are split back per request;
//  - generate / session feed / stateful embed: continuous batching. Every active sequence
//    advances in the same run call, one step at a time (a decode token, or a chunk of its prompt,
//    so long prompts prefill interleaved with other sequences' decoding); new sequences join
//    between steps.
// Session ops queue behind the session's running work, so one client's pipelined requests on a
// session apply in order.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/backend.h"
#include "engine/cpu/thread_pool.h"
#include "protocol/shm_ring.h"
#include "worker/job.h"
#include "worker/options.h"
#include "worker/prefix_cache.h"
#include "worker/sessions.h"
#include "worker/stats.h"
#include "worker/text_codec.h"

namespace rwkvd::worker {

class Scheduler {
 public:
  using Post = std::function<void(Outgoing)>;
  // A ring lease of `bytes` for a client's result, nullopt where it gets none now (no ring, over
  // its cap, full): the engine thread writes a state straight into it (no copy on the server
  // thread). Called on the engine thread.
  using Reserve = std::function<std::optional<protocol::ShmRing::Allocation>(
      const std::string& client, uint64_t bytes)>;
  Scheduler(engine::Backend& backend, const TextCodec* codec, const ServeOptions& options,
            Stats& stats, Post post, Reserve reserve = {});
  ~Scheduler();

  void start();
  // Fails everything in flight with shutting_down, then joins the thread.
  void stop();
  // Thread-safe. False when the queue is full (the caller replies busy).
  bool submit(Job job);
  // The client vanished (or stopped reading): drop its work without replying. With
  // close_sessions (it is gone for good) its sessions are closed too.
  void client_gone(const std::string& client, bool close_sessions);
  size_t queued() const { return queued_.load(); }

 private:
  struct Task;
  struct EmbedJob;

  void loop();
  void take_inbox(std::deque<Job>& jobs);
  void accept(Job job);
  // Fair scheduling among clients (by routing identity). Slots are dealt max-min fairly: a
  // client gets more than others only while nobody else wants one. Where all are taken and a
  // client holds more than its part while another waits, its longest-running tasks yield
  // (share_slots: preempted, their states moved to host memory, resumed later exactly where
  // they stopped); where every client holds its part and one still waits (more clients than
  // slots), a task that has run fair_quantum_steps yields, round-robin.
  struct Shares {
    std::unordered_map<std::string, uint32_t> held;    // slot-holding tasks running, by client
    std::unordered_map<std::string, uint64_t> demand;  // tasks (embed inputs) that could start
    std::vector<std::string> order;                    // clients of `demand`, longest waiting first
    void add_demand(const std::string& client, uint64_t n);
  };
  Shares shares();
  // `free` slots dealt one at a time to the client that would then hold fewest (keep_held: the
  // fair part of all slots, counting what each holds as wanted).
  std::unordered_map<std::string, uint32_t> deal(const Shares& sh, uint32_t free, bool keep_held);
  void share_slots();
  Task* longest_running(const std::string& client, uint64_t min_steps);
  void preempt(Task& t);
  bool resume(Task& t);
  uint64_t session_of(const Task& t);
  void admit();
  bool try_admit(Task& t);
  void run_control(Task& t, Session& s);
  // The session a task names: the client's own by id, or (a fork) whichever session its share
  // token shares; nullptr where there is none such (unknown_session, whichever the reason).
  Session* named_session(const Task& t);
  // Feeds the session's deferred token (Session::deferred) into its state now; false when no
  // slot can hold the session yet.
  bool settle(Session& s);
  void step();
  void dispatch_embeds();
  bool embeds_due(Clock::time_point now) const;
  // What a generate step asks of the engine for its next token: the argmax alone where that is
  // the pick (greedy, no penalties: 4 bytes from the device instead of 256 KB of logits and a
  // host pass over them), else the logits row for the sampler.
  static engine::OutputMode next_token_mode(const Task& t);
  // The next token of each generating task in `who` that has its logits or the engine's argmax
  // in `outs` (-1 for the rest): drawn in parallel where several draw at a temperature (each
  // ~1 ms for 65536 tokens).
  std::vector<int32_t> sample_outputs(const std::vector<Task*>& who,
                                      const std::vector<engine::Tensor>& outs);
  // `sampled`: the task's next token (generate; sample_outputs()), else unused.
  void after_output(Task& t, const engine::Tensor& out, int32_t sampled);
  // Whether an output holds only finite values (an argmax: a token, not -1); a task whose output
  // does not fails with an error that names the cause: bad_state where its state came from a
  // client (its request's or its session's), internal (the weights) where the worker made it.
  static bool finite_output(const engine::Tensor& out);
  static std::string non_finite_message(bool from_client_state);
  void fail_non_finite(Task& t, engine::Tensor& out);
  void finish(Task& t);
  void release_task(Task& t);
  void cancel(const Job& job);
  void fail_all(protocol::ErrorCode code, const std::string& msg);
  void reply_error(const Job& job, protocol::ErrorCode code, const std::string& msg);
  void emit_chunk(Task& t);
  // The reply's "state": `read` fills it, in a ring lease of the client where it asked for
  // shared memory and gets one (Reserve), else in a tensor the server places.
  void attach_state(Outgoing& o, const std::function<void(std::span<float>)>& read);
  void publish_gauges();

  engine::Backend& backend_;
  const TextCodec* codec_;
  ServeOptions opt_;
  Stats& stats_;
  Post post_;
  Reserve reserve_;
  SlotPool slots_;
  Sessions sessions_;
  PrefixCache prefix_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> inbox_;
  std::vector<std::pair<std::string, bool>> gone_;  // client, close its sessions
  bool stopping_ = false;
  std::atomic<size_t> queued_{0};
  std::thread thread_;

  std::deque<std::unique_ptr<Task>> waiting_;
  std::unordered_map<std::string, uint64_t>
      last_served_;  // client -> serve_clock_ at its last slot
  uint64_t serve_clock_ = 0;
  std::vector<std::unique_ptr<Task>> active_;
  std::deque<std::shared_ptr<EmbedJob>> embeds_;
  uint64_t embed_tokens_queued_ = 0;
  Clock::time_point last_reap_;
  std::unique_ptr<engine::cpu::ThreadPool> sample_pool_;  // made on first use
};

}  // namespace rwkvd::worker
