"""Endpoint safety, signals and cleanup of the worker process."""
from __future__ import annotations

import os
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

import rwkvd
from conftest import Worker, build_dir


def shm_segments(pid: int):
    return [p for p in Path("/dev/shm").glob(f"rwkvd-{os.getuid()}-{pid}-*")]


def test_non_loopback_tcp_is_refused_without_allow_remote(synthetic_model):
    r = subprocess.run([str(build_dir() / "tools" / "rwkvd"), "serve", "--model",
                        str(synthetic_model), "--endpoint", "tcp://0.0.0.0:45999"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "--allow-remote" in r.stderr


def test_socket_and_segment_modes_then_sigint_cleans_up(synthetic_model):
    w = Worker(synthetic_model, [])
    try:
        sock = w.dir / "w.sock"
        assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
        segs = shm_segments(w.proc.pid)
        assert len(segs) == 1 and stat.S_IMODE(os.stat(segs[0]).st_mode) == 0o600
        with w.client() as c:
            assert c.hello()["shm"]["name"] == segs[0].name
        w.proc.send_signal(signal.SIGINT)
        assert w.proc.wait(timeout=20) == 0
        assert not sock.exists()
        assert not shm_segments(w.proc.pid)
    finally:
        w.stop()


def test_in_flight_request_fails_cleanly_on_sigterm(synthetic_model):
    w = Worker(synthetic_model, [])
    try:
        with w.client() as c:
            it = c.generate("x", max_tokens=16000, stream=True)
            next(it)
            w.proc.send_signal(signal.SIGTERM)
            with pytest.raises(rwkvd.WorkerError) as e:
                for _ in it:
                    pass
            assert e.value.code == rwkvd.ErrorCode.SHUTTING_DOWN
        assert w.proc.wait(timeout=20) == 0
    finally:
        w.stop()


def test_stale_segment_of_a_dead_worker_is_removed(synthetic_model):
    dead = Worker(synthetic_model, [])
    dead.proc.kill()  # no chance to clean up
    dead.proc.wait()
    stale = shm_segments(dead.proc.pid)
    assert stale, "SIGKILL left no segment behind?"
    live = Worker(synthetic_model, [])
    try:
        assert not any(p.exists() for p in stale)
        assert shm_segments(live.proc.pid)
    finally:
        live.stop()
