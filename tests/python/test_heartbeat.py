"""Heartbeats (PROTOCOL.md): while a request runs the worker sends {id: 0, heartbeat: true}
every --heartbeat-ms of silence, so a client tells a slow request (kept alive) from a dead
worker (given up on after 3 intervals, not after the whole timeout)."""
from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import msgpack
import pytest
import zmq

import rwkvd
from conftest import Worker, start_worker

HEARTBEAT_S = 0.1


@pytest.fixture(scope="module")
def hb_worker(synthetic_model):
    yield from start_worker(synthetic_model, "--heartbeat-ms", str(int(HEARTBEAT_S * 1000)))


def long_generation(c: rwkvd.Client, at_least_s: float) -> int:
    """A max_tokens whose greedy generation takes about 3x at_least_s on this machine."""
    t0 = time.perf_counter()
    c.generate("calibrate", max_tokens=32, temperature=0.0)
    per_token = (time.perf_counter() - t0) / 32
    return min(16000, max(32, int(3 * at_least_s / per_token)))


def test_a_slow_request_is_kept_alive_by_heartbeats(hb_worker):
    liveness = 3 * HEARTBEAT_S
    with hb_worker.client(timeout=60) as c:
        assert c.hello()["heartbeat_ms"] == int(HEARTBEAT_S * 1000)
        n = long_generation(c, 2 * liveness)
        t0 = time.perf_counter()
        r = c.generate("slow", max_tokens=n, temperature=0.0)  # one reply at the end
        took = time.perf_counter() - t0
        assert r.completion_tokens == n
        assert took > liveness, f"{took:.2f}s: too short to outlive the liveness window"

    # On the wire: heartbeats while it runs, never more than the liveness window apart.
    ctx = zmq.Context()
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(hb_worker.endpoint)
    try:
        s.send(msgpack.packb({"v": 1, "id": 5, "op": "generate", "text": "slow",
                              "max_tokens": n, "temperature": 0.0}))
        beats, last = 0, time.monotonic()
        while True:
            assert s.poll(10000), "no message for 10 s"
            gap = time.monotonic() - last
            last = time.monotonic()
            m = msgpack.unpackb(s.recv(), raw=False, unicode_errors="replace")
            if m.get("heartbeat"):
                assert m["id"] == 0 and m["ok"] is True
                assert gap <= liveness, f"{gap * 1e3:.0f} ms between heartbeats"
                beats += 1
                continue
            assert m["id"] == 5 and m["ok"] and m["completion_tokens"] == n
            break
        assert beats >= 2
        assert not s.poll(int(4 * HEARTBEAT_S * 1000)), "a heartbeat with nothing in flight"
    finally:
        s.close()
        ctx.term()


def test_a_killed_worker_is_noticed_within_the_liveness_window(synthetic_model):
    w = Worker(synthetic_model, ["--heartbeat-ms", str(int(HEARTBEAT_S * 1000))])
    try:
        c = w.client(timeout=60)  # the request timeout alone would wait a minute
        n = long_generation(c, 2.0)
        outcome = {}

        def run():
            t = time.monotonic()
            try:
                c.generate("doomed", max_tokens=n, temperature=0.0)
                outcome["result"] = "a reply from a killed worker"
            except rwkvd.RequestTimeout as e:
                outcome["error"] = e
            outcome["at"] = time.monotonic() - t

        th = threading.Thread(target=run)
        th.start()
        time.sleep(0.5)  # well inside the generation
        w.proc.send_signal(signal.SIGKILL)
        w.proc.wait(timeout=10)
        killed = time.monotonic()
        th.join(timeout=30)
        assert not th.is_alive(), "the client hung"
        assert "error" in outcome, outcome
        assert "heartbeat" in str(outcome["error"])
        noticed = time.monotonic() - killed
        assert noticed < 3.0, f"noticed {noticed:.1f}s after the kill"
        c.close()
    finally:
        w.stop()
        for seg in Path("/dev/shm").glob(f"rwkvd-{os.getuid()}-{w.proc.pid}-*"):
            seg.unlink()  # SIGKILL left it; the next worker would remove it anyway
