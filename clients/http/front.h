#pragma once
// The OpenAI-compatible HTTP front of a worker (`rwkvd http`): a separate process, a client of
// the worker like any other (clients/cpp), so the worker itself stays free of HTTP. Loopback
// only unless allow_remote; an optional bearer token; request bodies up to max_body_bytes.
#include <memory>

#include "clients/http/options.h"

namespace httplib {
class Server;
}

namespace rwkvd::http {

struct Context;

class Front {
 public:
  explicit Front(HttpOptions options);  // throws std::invalid_argument on a refused address
  ~Front();
  Front(const Front&) = delete;
  Front& operator=(const Front&) = delete;

  // Binds the port (0: any free one) and returns it; throws std::runtime_error.
  int bind();
  // Serves until stop(); binds first where bind() was not called.
  void run();
  void stop();  // any thread
  // Why the worker cannot be reached now ("" when it answers): the front serves either way, with
  // 503 until it can.
  std::string probe_worker();
  const HttpOptions& options() const;

 private:
  void add_routes();
  std::unique_ptr<Context> ctx_;
  std::unique_ptr<httplib::Server> server_;
  bool bound_ = false;
};

// A loopback host: 127.0.0.0/8, ::1 or localhost.
bool is_loopback_host(const std::string& host);

}  // namespace rwkvd::http
