#!/usr/bin/python3
"""What the Python Client's thread safety costs, against a running worker.

Prints: the round trip of the cheapest request (tokenize) from one thread, best and median of
`--repeats` runs; the client-side part of it that the lock and the reply routing take (timed
without the socket); and calls per second from 4 threads sharing one Client (their calls take
turns) against 4 threads with a Client each.

  bench/client_threads.py --endpoint ipc:///path/w.sock [--calls 2000] [--repeats 9]
"""
from __future__ import annotations

import argparse
import collections
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients" / "python"))
import rwkvd  # noqa: E402


def round_trip_us(c: rwkvd.Client, calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        c.tokenize("hi")
    return (time.perf_counter() - t0) / calls * 1e6


def bookkeeping_us(c: rwkvd.Client, calls: int) -> float:
    """The lock, the in-flight registration, the routing and the take of one reply."""
    reply = {"id": 0, "ok": True}
    t0 = time.perf_counter()
    for _ in range(calls):
        with c._lock:
            c._check_usable()
            rid = c._next_id
            c._mail[rid] = collections.deque()
            reply["id"] = rid
            c._route(reply, fallback=rid)
            c._take((rid,))
            c._done([rid])
    return (time.perf_counter() - t0) / calls * 1e6


def threads_calls_per_s(clients, calls: int) -> float:
    def run(c):
        for _ in range(calls):
            c.tokenize("hi")
    threads = [threading.Thread(target=run, args=(c,)) for c in clients]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(clients) * calls / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--endpoint", default=None)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=9)
    a = ap.parse_args()
    with rwkvd.Client(a.endpoint) as c:
        c.hello()
        rt = [round_trip_us(c, a.calls) for _ in range(a.repeats)]
        bk = [bookkeeping_us(c, a.calls) for _ in range(a.repeats)]
        print(f"tokenize round trip, one thread: best {min(rt):.1f} us, "
              f"median {statistics.median(rt):.1f} us")
        print(f"of which lock + reply routing:   best {min(bk):.2f} us, "
              f"median {statistics.median(bk):.2f} us")
        shared = threads_calls_per_s([c] * 4, a.calls // 4)
    own = [rwkvd.Client(a.endpoint) for _ in range(4)]
    try:
        separate = threads_calls_per_s(own, a.calls // 4)
    finally:
        for o in own:
            o.close()
    print(f"4 threads, one shared Client: {shared:,.0f} calls/s; "
          f"a Client each: {separate:,.0f} calls/s")


if __name__ == "__main__":
    main()
