"""No worker at the endpoint: the Python client, the C++ client (through the CLI) and the CLI say
so within about a second, naming the endpoint and how to start one, instead of waiting out
their request timeouts (60 s, 120 s)."""
from __future__ import annotations

import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

import rwkvd
from conftest import Worker, build_dir

BOUND_S = 5  # generous: the promise is about a second, the old behaviour a minute


@pytest.fixture
def nowhere() -> Path:
    d = Path(tempfile.mkdtemp(prefix="rwkvd-nowhere-"))
    return d


def stale_socket(d: Path) -> str:
    """A socket file nobody listens on (what a killed worker leaves)."""
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(d / "stale.sock"))
    s.close()
    return f"ipc://{d}/stale.sock"


def python_error(endpoint: str) -> str:
    t0 = time.monotonic()
    with pytest.raises(rwkvd.NoWorker) as e:
        rwkvd.Client(endpoint, timeout=60).generate("hi")
    assert time.monotonic() - t0 < BOUND_S
    return str(e.value)


def cli_error(endpoint: str) -> str:
    t0 = time.monotonic()
    r = subprocess.run([str(build_dir() / "tools" / "rwkvd"), "generate", "--text", "hi",
                        "--endpoint", endpoint], capture_output=True, text=True, timeout=60)
    assert time.monotonic() - t0 < BOUND_S
    assert r.returncode != 0
    return r.stderr


def expect_no_worker(msg: str, endpoint: str, why: str) -> None:
    assert endpoint in msg, msg
    assert why in msg, msg
    assert f"rwkvd serve --model FILE.gguf --endpoint {endpoint}" in msg, msg


@pytest.mark.parametrize("error", [python_error, cli_error], ids=["python", "cli"])
def test_no_socket_file(nowhere, error):
    ep = f"ipc://{nowhere}/none.sock"
    expect_no_worker(error(ep), ep, "there is no socket")


@pytest.mark.parametrize("error", [python_error, cli_error], ids=["python", "cli"])
def test_a_socket_nobody_answers(nowhere, error):
    ep = stale_socket(nowhere)
    expect_no_worker(error(ep), ep, "no answer")


@pytest.mark.parametrize("error", [python_error, cli_error], ids=["python", "cli"])
def test_a_stopped_worker(synthetic_model, error):
    w = Worker(synthetic_model, [])
    try:
        w.proc.send_signal(signal.SIGSTOP)
        expect_no_worker(error(w.endpoint), w.endpoint, "no answer")
        w.proc.send_signal(signal.SIGCONT)
        with w.client(timeout=10) as c:  # and once it runs again, it is found
            assert c.hello()["protocol"] == 1
    finally:
        w.proc.send_signal(signal.SIGCONT)
        w.stop()


def test_a_client_whose_worker_went_away_says_so_on_its_next_call(synthetic_model):
    w = Worker(synthetic_model, [])
    c = w.client(timeout=2)
    c.hello()
    w.stop()  # a clean stop removes the socket file
    t0 = time.monotonic()
    with pytest.raises(rwkvd.RwkvdError):
        c.embed("x")  # the old socket: a timeout (at most the 2 s asked for)
    with pytest.raises(rwkvd.NoWorker, match="there is no socket"):
        c.embed("x")  # then a fresh connection finds nobody at once
    assert time.monotonic() - t0 < 2 + BOUND_S
    c.close()


def test_the_cli_reaches_a_running_worker(worker):
    r = subprocess.run([str(build_dir() / "tools" / "rwkvd"), "stats", "--endpoint",
                        worker.endpoint], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_the_connect_function_serves_asyncio_contexts_too(worker, nowhere):
    import asyncio

    import msgpack
    import zmq.asyncio

    from rwkvd import _connect

    ctx = zmq.asyncio.Context()
    try:
        with pytest.raises(rwkvd.NoWorker, match="there is no socket"):
            _connect.connect(ctx, f"ipc://{nowhere}/none.sock", b"pasync")
        sock = _connect.connect(ctx, worker.endpoint, b"pasync")
        assert isinstance(sock, zmq.asyncio.Socket)

        async def hello():
            await sock.send(msgpack.packb({"v": 1, "id": 7, "op": "hello"}))
            return msgpack.unpackb(await asyncio.wait_for(sock.recv(), 10))

        assert asyncio.run(hello())["id"] == 7
        sock.close(linger=0)
    finally:
        ctx.term()


def test_a_socket_that_shakes_hands_and_never_answers(nowhere):
    """A stuck worker: ZeroMQ's handshake succeeds, so the client gives it the 3 s a silent
    worker gets (PROTOCOL.md, Heartbeats), then says so."""
    import zmq

    ep = f"ipc://{nowhere}/hole.sock"
    ctx = zmq.Context()
    hole = ctx.socket(zmq.ROUTER)
    hole.bind(ep)
    try:
        t0 = time.monotonic()
        with pytest.raises(rwkvd.NoWorker, match="did not answer") as e:
            rwkvd.Client(ep)
        assert 2.5 < time.monotonic() - t0 < 3 + BOUND_S
        expect_no_worker(str(e.value), ep, "within 3 s")
    finally:
        hole.close(linger=0)
        ctx.term()
