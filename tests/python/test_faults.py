"""Faults around a real worker process: clients and workers killed (SIGKILL) at bad moments, a
client that never reads, per-client caps through the serve flags, and an absurd --slots."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import msgpack
import numpy as np
import pytest
import zmq

import rwkvd
from conftest import slow_reader, REPO, Worker, build_dir, start_worker


def wait_until(cond, timeout: float, what: str, step: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def python_child(endpoint: str, body: str) -> subprocess.Popen:
    """A client in its own process (so it can be SIGKILLed); prints 'ready' when set up."""
    code = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(REPO / 'clients' / 'python')!r})
        import rwkvd
        c = rwkvd.Client({endpoint!r}, timeout=30)
    """) + textwrap.dedent(body) + "\nprint('ready', flush=True)\ntime.sleep(120)\n"
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    assert line.strip() == "ready", f"child did not get ready: {line!r}"
    return p


class Background:
    """Another client doing embeds in a thread the whole time, checking every answer."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.stop = threading.Event()
        self.served = 0
        self.failures = []
        with worker.client() as c:
            self.expected = np.array(c.embed("background"), copy=True)
        self.thread = threading.Thread(target=self._run)
        self.thread.start()

    def _run(self) -> None:
        # Inline tensors: it holds no leases, so the tests can count the others'.
        with self.worker.client(timeout=15, use_shm=False) as c:
            while not self.stop.is_set():
                try:
                    v = c.embed("background")
                    if not np.allclose(v, self.expected, atol=1e-4):
                        self.failures.append("wrong embedding")
                    self.served += 1
                except Exception as e:  # noqa: BLE001
                    self.failures.append(repr(e))
                time.sleep(0.01)

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(timeout=30)
        assert not self.failures, self.failures[:3]
        assert self.served > 0


@pytest.fixture(scope="module")
def short_timeouts(synthetic_model):
    # Leases of a gone client freed after ~1 s (plus the checks a second apart), idle sessions
    # closed after ~1 s, small per-client caps.
    yield from start_worker(synthetic_model, "--lease-timeout-s", "1", "--session-idle-s", "1",
                            "--max-sessions-per-client", "4", "--max-inflight-per-client", "8",
                            "--max-leases-per-client", "6", "--slots", "8")


def test_killed_client_gives_its_leases_sessions_and_slots_back(short_timeouts):
    w = short_timeouts
    bg = Background(w)
    child = python_child(w.endpoint, """
        keep = [c.embed("held %d" % i) for i in range(3)]      # 3 leases, never released
        sessions = [c.session() for _ in range(3)]
        for s in sessions:
            s.feed("a session with some state")                   # each in a state slot
        assert c.shm_mapped
    """)
    try:
        st = w.stats()
        assert st["shm"]["leases"] >= 3 and st["sessions"] >= 3 and st["slots_used"] >= 3
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        wait_until(lambda: (s := w.stats())["shm"]["leases"] == 0 and s["sessions"] == 0
                   and s["slots_used"] == 0, 15, "leases, sessions and slots to come back")
    finally:
        child.kill()
        child.wait()
    bg.finish()


def test_per_client_caps_from_the_serve_flags(short_timeouts):
    w = short_timeouts
    with w.client() as c:
        sessions = [c.session() for _ in range(4)]
        with pytest.raises(rwkvd.WorkerError) as e:
            c.session()
        assert e.value.code == rwkvd.ErrorCode.QUOTA_EXCEEDED
        with pytest.raises(rwkvd.WorkerError) as e:
            sessions[0].fork()
        assert e.value.code == rwkvd.ErrorCode.QUOTA_EXCEEDED
        with w.client() as other:
            other.session().close()  # the cap is per client
        sessions[0].close()
        c.session().close()
        # Leases: 6 held, the 7th tensor comes inline.
        c.release_now()
        before = c.stats()["shm"]["leases"]  # other clients' (async releases may still land)
        held = [c.embed("lease %d" % i) for i in range(6)]
        inline = c.embed("seventh")
        assert inline.shape == (256,)
        assert c.stats()["shm"]["leases"] <= before + 6
        assert c.stats()["shm"]["events"].get("inline_quota", 0) >= 1
        del held, inline
    # In flight: 8 accepted, the rest refused with quota_exceeded.
    ctx = zmq.Context()
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(w.endpoint)
    try:
        for i in range(12):
            s.send(msgpack.packb({"v": 1, "id": i + 1, "op": "generate", "tokens": [1, 2, 3],
                                  "max_tokens": 16000}))
        codes = []
        while len(codes) < 4:
            assert s.poll(10000)
            r = msgpack.unpackb(s.recv(), unicode_errors="replace")
            if r.get("heartbeat"):  # the worker's sign of life, not a reply
                continue
            codes.append(r["error"]["code"] if not r["ok"] else 0)
        assert codes == [rwkvd.ErrorCode.QUOTA_EXCEEDED] * 4
        for i in range(8):
            s.send(msgpack.packb({"v": 1, "id": 100 + i, "op": "cancel", "target": i + 1}))
        finals = 0
        while finals < 16 and s.poll(10000):
            r = msgpack.unpackb(s.recv(), unicode_errors="replace")
            finals += not r.get("more", False) and not r.get("heartbeat", False)
        assert finals == 16  # 8 cancel acks + 8 generations that ended
    finally:
        s.close()
        ctx.term()


def test_client_that_never_reads_costs_bounded_memory(synthetic_model):
    # Each reply carries a state (~200 KB inline). Without the per-client queue cap, 400 of them
    # sit in the worker's memory (measured: +93 MiB with --client-queue 100000); with
    # --client-queue 16 at most 16 do (measured: +18 MiB, allocator slack included).
    for w in start_worker(synthetic_model, "--client-queue", "16",
                          "--max-inflight-per-client", "400"):
        bg = Background(w)
        before = w.rss()
        ctx = zmq.Context()
        slow = slow_reader(ctx, w.endpoint)
        peak = before
        try:
            for i in range(400):
                slow.send(msgpack.packb({"v": 1, "id": i + 1, "op": "generate",
                                         "tokens": [5, 6, 7], "max_tokens": 1,
                                         "return_state": True}))
                if i % 20 == 0:
                    peak = max(peak, w.rss())
                    time.sleep(0.02)
            wait_until(lambda: w.stats()["clients"].get("stalled", 0) > 0, 20,
                       "the worker to notice the stalled client")
            wait_until(lambda: w.stats()["queue_depth"] == 0, 20, "its work to be dropped")
            peak = max(peak, w.rss())
        finally:
            slow.close()
            ctx.term()
        bg.finish()
        growth = peak - before
        assert growth < 40 << 20, f"worker RSS grew {growth >> 20} MiB for a client not reading"
        assert w.stats()["clients"]["stalled"] > 0


def test_worker_killed_mid_request_then_restarted(synthetic_model):
    first = Worker(synthetic_model, [])
    second = None
    try:
        seg = [p for p in Path("/dev/shm").glob(f"rwkvd-{os.getuid()}-{first.proc.pid}-*")]
        assert len(seg) == 1
        c = first.client(timeout=2)
        c.embed("before")
        assert c.shm_mapped
        stream = c.generate("a long one", max_tokens=16000, stream=True)
        next(stream)
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(timeout=10)
        t0 = time.monotonic()
        with pytest.raises(rwkvd.RequestTimeout):
            for _ in stream:
                pass
        assert time.monotonic() - t0 < 6, "the client hung instead of timing out"
        assert seg[0].exists(), "SIGKILL should have left the segment behind"
        # A new worker on the same endpoint removes the stale segment and serves; the same
        # client object gets there by itself.
        second = Worker(synthetic_model, [], directory=first.dir)
        assert not seg[0].exists()
        c.timeout = 30
        v = c.embed("after")
        assert v.shape == (256,)
        new_seg = [p for p in Path("/dev/shm").glob(f"rwkvd-{os.getuid()}-{second.proc.pid}-*")]
        assert c.shm_mapped and c._ring.name == new_seg[0].name
        c.close()
    finally:
        first.stop()
        if second:
            second.stop()


def test_absurd_slot_count_is_refused_with_a_message(synthetic_model):
    r = subprocess.run([str(build_dir() / "tools" / "rwkvd"), "serve", "--model",
                        str(synthetic_model), "--slots", "4000000000", "--endpoint",
                        "ipc:///nonexistent-dir-rwkvd/x.sock"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, (r.returncode, r.stderr[-500:])  # an error exit, not SIGABRT/OOM
    assert "slots" in r.stderr


def test_gpu_out_of_memory_is_an_error_not_an_abort(synthetic_model):
    """More state slots than the device can hold (3M slots x 198 KiB = 600 GB): the Vulkan
    engine's allocation fails and serve exits with a message (lavapipe in CI)."""
    r = subprocess.run([str(build_dir() / "tools" / "rwkvd"), "serve", "--model",
                        str(synthetic_model), "--device", "gpu", "--slots", "3000000",
                        "--endpoint", "ipc:///nonexistent-dir-rwkvd/x.sock"],
                       capture_output=True, text=True, timeout=120)
    if "no Vulkan engine" in r.stderr:
        pytest.skip("this build has no Vulkan engine")
    assert r.returncode == 1, (r.returncode, r.stderr[-500:])  # not SIGABRT, not the OOM killer
    assert "OUT_OF_DEVICE_MEMORY" in r.stderr or "memory" in r.stderr.lower(), r.stderr[-500:]
