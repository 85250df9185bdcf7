"""The ring's segment is writable by every process of the user: garbage written into its header
or a truncation of the object must leave the worker serving, with correct results."""
from __future__ import annotations

import os
import time

import msgpack
import numpy as np
import pytest
import zmq

import rwkvd

from conftest import start_worker


@pytest.fixture()
def worker(synthetic_model):
    yield from start_worker(synthetic_model, "--shm-mb", "1")


def ring_path(client) -> str:
    return os.path.join("/dev/shm", client.hello()["shm"]["name"])


def in_ring(client, arr: np.ndarray) -> bool:
    return np.shares_memory(arr, np.frombuffer(client._ring.mm, dtype=np.uint8))


def test_garbage_in_the_ring_header_changes_nothing_the_worker_does(worker):
    texts = [f"text {i}" for i in range(8)]
    with worker.client(use_shm=False) as inline, inline.session() as s:
        want = inline.embed(texts)
        s.feed("a state to compare")
        want_state = s.state()
    with worker.client() as c, c.session() as s:
        s.feed("a state to compare")
        assert in_ring(c, c.embed(texts))
        with open(ring_path(c), "r+b") as f:
            # total, data offset and size, slot count and size, pid: all ones; then the slots.
            f.seek(16)
            f.write(b"\xff" * 48 + b"\x7f" * 32 * 64)
        for _ in range(20):
            np.testing.assert_array_equal(c.embed(texts), want)
        for _ in range(50):  # ~200 KiB each: the 1 MiB ring is reused many times
            np.testing.assert_array_equal(s.state(), want_state)
        assert worker.proc.poll() is None
    # A client mapping the ring now finds no ring there and takes its results inline.
    with worker.client() as late:
        np.testing.assert_array_equal(late.embed(texts), want)
        assert not late.shm_mapped
    assert worker.proc.poll() is None


def test_a_truncated_ring_is_replaced_and_the_worker_serves_on(worker):
    texts = [f"text {i}" for i in range(8)]
    mapped = worker.client()  # maps the ring before it is truncated
    with worker.client(use_shm=False) as inline:
        want = inline.embed(texts)
        old = ring_path(mapped)
        assert in_ring(mapped, mapped.embed(texts))
        ctx = zmq.Context()
        raw = ctx.socket(zmq.DEALER)  # asks for shared memory, never reads the ring
        raw.setsockopt(zmq.LINGER, 0)
        raw.connect(worker.endpoint)
        try:
            os.truncate(old, 0)
            for i in range(20):
                raw.send(msgpack.packb({"v": 1, "id": i + 1, "op": "embed", "shm": True,
                                        "inputs": texts}))
            answered = 0
            while answered < 20:
                assert raw.poll(10000), "no reply from the worker"
                r = msgpack.unpackb(raw.recv(), raw=False)
                answered += not r.get("heartbeat", False)
        finally:
            raw.close()
            ctx.term()
        assert worker.proc.poll() is None
        deadline = 50
        while inline.stats()["shm"]["events"].get("recreated", 0) == 0 and deadline:
            deadline -= 1
            time.sleep(0.1)
        assert inline.stats()["shm"]["events"].get("recreated", 0) >= 1
    # A client still mapping the truncated object is told so (not a SIGBUS), then maps the new.
    with pytest.raises(rwkvd.WorkerError) as e:
        mapped.embed(texts)
    assert e.value.code == rwkvd.ErrorCode.UNKNOWN_LEASE
    got = mapped.embed(texts)
    assert in_ring(mapped, got)
    np.testing.assert_array_equal(got, want)
    mapped.close()
    with worker.client() as c:
        assert ring_path(c) != old and not os.path.exists(old)
        got = c.embed(texts)
        assert in_ring(c, got)
        np.testing.assert_array_equal(got, want)
