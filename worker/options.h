#pragma once
// Everything `rwkvd serve` can be told, with the defaults it uses.
#include <cstdint>
#include <string>

#include "protocol/messages.h"

namespace rwkvd::worker {

struct ServeOptions {
  std::string endpoint;                 // empty: default_endpoint()
  bool allow_remote = false;            // tcp on a non-loopback address
  bool curve = false;                   // CURVE over ipc too (tcp always has it)
  bool coalesce_embeds = true;          // false: each embed request is its own engine run
  uint32_t batch_window_us = 2000;      // embed coalescing: wait this long for company
  uint32_t embed_token_budget = 16384;  // ... or until this many tokens are queued
  // With no generation stepping, a new round's first step waits until no further request has
  // come for this long (at most 4 times as long in all), so requests sent together (a client's
  // generate_all, agents forking one document's session) start in the same batch instead of
  // joining one step after another; forks and opens that come meanwhile run at once. 0: start
  // at once.
  uint32_t join_window_us = 250;
  uint32_t prefill_chunk = 128;         // prompt tokens per sequence per generation step
  uint32_t prefill_chunk_alone = 1024;  // ... when no other sequence has work (nobody waits)
  uint32_t step_token_budget = 1024;    // prompt tokens per generation step, all sequences
  // Fair scheduling: with more clients waiting than slots, a task yields its slot to a waiting
  // client after this many steps (Scheduler::share_slots). 0: only a client over its fair part
  // of the slots yields.
  uint32_t fair_quantum_steps = 64;
  uint32_t max_queue = 4096;                // queued requests before replying busy
  uint32_t session_idle_s = 900;            // sessions unused this long are closed
  uint64_t prefix_cache_bytes = 64u << 20;  // 0 disables the prefix cache
  uint32_t prefix_min_tokens = 4;           // shorter prompts are not cached
  uint64_t shm_bytes = 256u << 20;          // 0 disables the shared-memory ring
  uint32_t shm_slots = 1024;
  uint32_t shm_wait_ms = 20;       // a full ring waits this long, then goes inline
  uint32_t lease_timeout_s = 120;  // a client holding leases this long is checked (not freed)
  // A client with requests in flight gets a heartbeat after this long without any message from
  // us, so it can tell a slow request from a dead worker (PROTOCOL.md, Heartbeats). 0: none.
  uint32_t heartbeat_ms = 1000;
  // Per-client caps, so one client (buggy, greedy or stuck) cannot take what others need. A
  // client is a ZeroMQ routing identity (one per client socket).
  uint32_t max_sessions_per_client = 64;   // open sessions; more: quota_exceeded
  uint32_t max_inflight_per_client = 256;  // requests queued or running; more: quota_exceeded
  uint32_t max_leases_per_client = 256;    // ring leases held; more tensors go inline
  // Replies queued by ZeroMQ for one client (its send high-water mark). A client whose queue
  // fills has stopped reading: its work is dropped (it keeps its leases), so its replies cannot
  // pile up in the worker's memory.
  uint32_t client_queue = 1000;
  // ... and bytes of replies queued for one client. A reply that would take a client past it
  // (with others still queued) is dropped and an error for its id (quota_exceeded) goes in its
  // place, so a client that does not read costs at most this plus one reply.
  uint64_t client_queue_bytes = 128u << 20;
  // On Server::request_drain(): no new engine work; what is queued or running finishes for up
  // to this many seconds, then the worker stops. 0: request_drain() stops at once.
  uint32_t drain_s = 0;
  protocol::Limits limits;
};

}  // namespace rwkvd::worker
