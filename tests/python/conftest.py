"""Shared pytest fixtures: a real `rwkvd serve` subprocess on a private ipc endpoint.

The build dir is $RWKVD_BUILD_DIR or <repo>/build; fixtures are $RWKVD_FIXTURES or
<repo>/../shared/fixtures. A missing fixture skips the test with a message, or fails it when
RWKVD_REQUIRE_FIXTURES=1 (as tests/support/fixtures.h does for C++).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator, List, Optional

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "clients" / "python"))  # importable from the source tree

import rwkvd  # noqa: E402

# CURVE keys (made by workers on tcp) go to a directory of the test run, not the user's own.
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="rwkvd-test-config-")


def build_dir() -> Path:
    return Path(os.environ.get("RWKVD_BUILD_DIR") or REPO / "build")


def fixtures_root() -> Path:
    return Path(os.environ.get("RWKVD_FIXTURES") or REPO.parent / "shared" / "fixtures")


def require(path: Path, what: str) -> Path:
    if not path.exists():
        msg = f"{what} missing: {path}"
        if os.environ.get("RWKVD_REQUIRE_FIXTURES") == "1":
            pytest.fail(msg + " (RWKVD_REQUIRE_FIXTURES=1)")
        pytest.skip(msg + ", skipping (set RWKVD_FIXTURES / build first)")
    return path


class Worker:
    """A running `rwkvd serve`; stop() sends SIGTERM and waits."""

    def __init__(self, model: Path, extra: List[str], directory: Optional[Path] = None) -> None:
        # The same directory means the same endpoint: how a test restarts a worker.
        self.dir = directory or Path(tempfile.mkdtemp(prefix="rwkvd-py-"))
        os.chmod(self.dir, 0o700)
        self.endpoint = f"ipc://{self.dir}/w.sock"
        self.log = open(self.dir / "serve.log", "a+")
        binary = require(build_dir() / "tools" / "rwkvd", "rwkvd binary")
        self.proc = subprocess.Popen(
            [str(binary), "serve", "--model", str(model), "--endpoint", self.endpoint,
             "--threads", "2", "--log-level", "warn", *extra],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("worker exited early:\n" + self.read_log())
            if (self.dir / "w.sock").exists():
                try:
                    with rwkvd.Client(self.endpoint, timeout=2) as c:
                        c.hello()
                    break
                except (rwkvd.RequestTimeout, rwkvd.NoWorker):
                    pass
            if time.time() > deadline:
                raise RuntimeError("worker did not come up:\n" + self.read_log())
            time.sleep(0.05)

    def read_log(self) -> str:
        self.log.flush()
        return (self.dir / "serve.log").read_text()

    def client(self, **kw) -> rwkvd.Client:
        kw.setdefault("timeout", 30)
        return rwkvd.Client(self.endpoint, **kw)

    def stats(self) -> dict:
        with self.client(timeout=10) as c:
            return c.stats()

    def rss(self) -> int:
        """The worker's resident set (VmRSS) in bytes."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "soak: the bounded soak (runs in CI; -m 'not soak' skips it)")


@pytest.fixture(scope="module")
def synthetic_model() -> Path:
    return require(fixtures_root() / "rwkv7" / "synthetic-A.f32.gguf", "fixture")


def start_worker(model: Path, *extra: str) -> Iterator[Worker]:
    w = Worker(model, list(extra))
    try:
        yield w
    finally:
        w.stop()


@pytest.fixture(scope="module")
def worker(synthetic_model: Path) -> Iterator[Worker]:
    """One worker for a test module, with small limits so the limit tests stay cheap."""
    yield from start_worker(synthetic_model, "--max-tokens", "4096", "--max-batch", "16",
                            "--max-message-bytes", str(1 << 20), "--batch-window-us", "2000")


@pytest.fixture
def raw(worker):
    """A bare DEALER socket on the test's worker, for frames no client would send."""
    import zmq

    ctx = zmq.Context()
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(worker.endpoint)
    yield s
    s.close()
    ctx.term()


def slow_reader(ctx, endpoint: str):
    """A DEALER connected to `endpoint` that holds at most one reply and a 4 KiB socket buffer:
    a client that stops reading, whose queue at the worker fills at once."""
    import zmq

    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.setsockopt(zmq.RCVHWM, 1)
    s.setsockopt(zmq.RCVBUF, 4096)
    s.connect(endpoint)
    return s
