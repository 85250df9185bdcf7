#pragma once
// What every route of the front shares: its options, its clients of the worker, and what the
// worker says of its model.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "clients/http/client_pool.h"
#include "clients/http/fields.h"
#include "clients/http/options.h"

namespace rwkvd::http {

// The worker's model and limits, from its hello.
struct ModelCard {
  std::string id;  // the model's name: what requests name in `model`
  uint32_t n_vocab = 0;
  uint32_t n_embd = 0;
  std::vector<int64_t> state_shape;
  uint64_t max_new_tokens = 0, max_batch = 0, max_stop = 0, max_stop_bytes = 0;
};
ModelCard model_card(client::Client& c);

struct Context {
  explicit Context(HttpOptions o);
  HttpOptions opt;
  ClientPool pool;
  // For /health: a short timeout, so a dead worker is reported in seconds.
  ClientPool probe;
  int64_t created = 0;  // unix time the front started: the model's `created`
  std::atomic<uint64_t> next_id{1};

  void count_response(int status);
  std::map<int, uint64_t> responses() const;

  // "<prefix>-<16 hex digits>", unique within this front.
  std::string response_id(const char* prefix);

 private:
  mutable std::mutex mu_;
  std::map<int, uint64_t> responses_;  // by HTTP status
};

// The request's `model`: required, and the worker's model (404 model_not_found otherwise).
void check_model(Fields& f, const ModelCard& card);

}  // namespace rwkvd::http
