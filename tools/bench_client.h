#pragma once
// The client-level figures of `rwkvd bench`, measured through a real worker: `rwkvd serve` is
// started as a subprocess of this binary (/proc/self/exe) on an ipc endpoint in a private temp
// directory, on the device the user chose, and driven by the C++ client library with the
// shared-memory ring mapped:
//   load.process_first_token_ms   serve start -> first generated token, a fresh process per repeat
//   doc_state.client_ms           email -> its state as float32 in this process: session open,
//                                 feed the text, session_state (a view of the ring); and the same
//                                 with the tensor inline in the reply (doc_state.client_inline_ms)
//   field_analysis.client_ms      6 sessions opened from the document's state, each generate 8
//                                 tokens + an embedding, all 6 in flight at once from 6 clients
//                                 (each sends the state: sessions are per client)
//   field_analysis.shared_clients_ms
//                                 the same, each client forking the document's session (computed
//                                 from the email and shared before the clock) by its share token
//                                 instead
//   embed.client_{coalesced,single}.docs_s
//                                 documents of 200 tokens from 8 forked client processes, with the
//                                 worker's embed coalescing on and off (serve --no-coalesce); the
//                                 batch-size histograms from the worker's stats go to the context.
#include "tools/bench_report.h"
#include "tools/bench_util.h"

namespace rwkvd::tools {

void run_client_bench(const BenchOptions& options, BenchReport& report);

}  // namespace rwkvd::tools
