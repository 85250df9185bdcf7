"""Zero-copy results that cannot go stale: an array that views the worker's ring keeps its lease
for as long as the program holds it, however long that is and however many requests follow;
when the ring is full, results come inline (a copy) instead of taking a held lease back; an
array that is garbage-collected gives its space back. On a worker with a 1 MiB ring and a 2 s
lease timeout, so that both the ring and the timeout are passed many times over."""
from __future__ import annotations

import gc
import time

import msgpack
import numpy as np
import pytest
import zmq

from conftest import slow_reader, start_worker

LEASE_TIMEOUT_S = 2


@pytest.fixture(scope="module")
def tiny_ring(synthetic_model):
    yield from start_worker(synthetic_model, "--shm-mb", "1",
                            "--lease-timeout-s", str(LEASE_TIMEOUT_S))


def in_ring(client, arr: np.ndarray) -> bool:
    return np.shares_memory(arr, np.frombuffer(client._ring.mm, dtype=np.uint8))


def addr(arr: np.ndarray) -> int:
    return arr.__array_interface__["data"][0]


def shm_stats(client) -> dict:
    return client.stats()["shm"]


def later_embeds(client, n: int, group: int = 50) -> None:
    """n more embed requests, `group` in flight at a time (the worker batches them), each
    result taken as an array and dropped, as a program would."""
    for at in range(0, n, group):
        replies = client.call_all([("embed", {"text": f"later request {i}"})
                                   for i in range(at, min(n, at + group))])
        for r in replies:
            client._tensor(r["embeddings"])


def test_arrays_kept_past_the_timeout_and_thousands_of_requests_keep_every_byte(tiny_ring):
    texts = ["the first of four", "a second text", "third", "and a fourth one"]
    with tiny_ring.client() as c, c.session() as s:
        e = c.embed(texts)
        keep = e.copy()
        s.feed("a session whose state is kept " * 8)
        st = s.state()
        keep_st = st.copy()
        logits = c.forward([5, 6, 7, 8], output="all_logits").output
        keep_logits = logits.copy()
        assert in_ring(c, e) and in_ring(c, st) and in_ring(c, logits)
        time.sleep(2 * LEASE_TIMEOUT_S)  # every lease is past its timeout
        # Thousands of results after them: 1,500 embeds like the ones kept, and states (~200
        # KiB each: the 1 MiB ring is cycled through hundreds of times).
        later_embeds(c, 1500, group=100)
        for i in range(1000):
            s.state()
        assert np.array_equal(e, keep)
        assert np.array_equal(st, keep_st)
        assert np.array_equal(logits, keep_logits)
        assert in_ring(c, e) and in_ring(c, st) and in_ring(c, logits)  # still zero-copy
        shm = shm_stats(c)
        # The worker asked whether we were still there instead of taking the leases back.
        assert shm["events"].get("owner_checks", 0) >= 1
        assert "expired" not in shm["events"]
        del e, st, logits


def test_a_full_ring_answers_inline_and_counts_it(tiny_ring):
    with tiny_ring.client() as c, c.session() as s:
        s.feed("fill the ring " * 20)
        before = shm_stats(c)["events"]
        held, copies = [], []
        for _ in range(64):  # a state is ~198 KiB: a handful fill 1 MiB
            st = s.state()
            if not in_ring(c, st):
                break
            held.append(st)
            copies.append(st.copy())
        else:
            pytest.fail("64 states held and the 1 MiB ring never filled")
        assert len(held) >= 3
        more = [s.state() for _ in range(20)]  # no room for one: each comes inline
        assert not any(in_ring(c, m) for m in more)
        assert all(np.array_equal(m, more[0]) for m in more)
        after = shm_stats(c)["events"]
        assert after.get("inline_fallbacks", 0) - before.get("inline_fallbacks", 0) >= 20
        for h, k in zip(held, copies):
            assert np.array_equal(h, k)
        del held, more, st


def wait_for(cond, what: str) -> None:
    deadline = time.monotonic() + 20
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def wait_ring_empty(client) -> None:
    """Until no client holds a lease (those of earlier tests' clients are released)."""
    deadline = time.monotonic() + 10
    while shm_stats(client)["leases"] > 0:
        assert time.monotonic() < deadline, "leases of closed clients were never given back"
        time.sleep(0.05)


def test_collected_arrays_give_their_space_back(tiny_ring):
    with tiny_ring.client() as c, c.session() as s:
        wait_ring_empty(c)
        s.feed("space comes back " * 20)
        held = []
        while True:
            st = s.state()
            if not in_ring(c, st):
                break
            held.append(st)
        full = shm_stats(c)
        spans = [(addr(h), addr(h) + h.nbytes) for h in held]
        del held, st
        gc.collect()
        back = s.state()  # carries the releases of the collected arrays
        assert in_ring(c, back)
        start, end = addr(back), addr(back) + back.nbytes
        assert any(a < end and start < b for a, b in spans)  # the same space, used again
        now = shm_stats(c)
        assert now["bytes_in_use"] < full["bytes_in_use"]
        assert now["leases"] < full["leases"]


def test_arrays_outliving_their_client_keep_their_bytes_and_free_the_ring(tiny_ring):
    with tiny_ring.client() as watcher:
        wait_ring_empty(watcher)
        c = tiny_ring.client()
        s = c.session()
        s.feed("outlives its client " * 10)
        st = s.state()
        e = c.embed(["one", "two", "three"])
        rows = e[1:]  # a view of a view: the same lease
        keep_st, keep_e = st.copy(), e.copy()
        assert in_ring(c, st) and in_ring(c, e)
        assert shm_stats(watcher)["leases"] == 2
        c.close()
        deadline = time.monotonic() + 5  # the release is sent, not waited for
        while shm_stats(watcher)["leases"] > 0:
            assert time.monotonic() < deadline, "close() did not give the leases back"
            time.sleep(0.01)
        for _ in range(50):  # others' results now land where these arrays were
            with tiny_ring.client() as other, other.session() as o:
                o.feed("overwrite")
                o.state()
                other.embed(["x", "y", "z"])
        assert np.array_equal(st, keep_st)
        assert np.array_equal(e, keep_e) and np.array_equal(rows, keep_e[1:])
        assert not st.flags.writeable


def test_a_client_that_stops_reading_keeps_its_leases_and_unsent_ones_go_back(synthetic_model):
    for w in start_worker(synthetic_model, "--client-queue", "16",
                          "--max-inflight-per-client", "400"):
        with w.client() as watcher:
            watcher.hello()
            ring = watcher._ring
            ctx = zmq.Context()
            slow = slow_reader(ctx, w.endpoint)
            try:
                slow.send(msgpack.packb({"v": 1, "id": 1, "op": "embed", "text": "held",
                                         "shm": True}))
                assert slow.poll(10000)
                held = msgpack.unpackb(slow.recv(), raw=False)["embeddings"]
                ring.check(held["shm"], held["shape"])
                # Then it stops reading: big inline replies fill its queue.
                for i in range(40):
                    slow.send(msgpack.packb({"v": 1, "id": i + 2, "op": "generate",
                                             "tokens": [5, 6, 7], "max_tokens": 1,
                                             "return_state": True}))
                wait_for(lambda: watcher.stats()["clients"].get("stalled", 0) > 0
                         and watcher.stats()["queue_depth"] == 0, "the worker to find it stalled")
                ring.check(held["shm"], held["shape"])  # still its lease, bytes untouched
                # Results through the ring that cannot be sent to it give their leases back.
                st = watcher.stats()
                embeds = st["requests"].get("embed", 0)
                allocations = st["shm"]["events"].get("allocations", 0)
                for i in range(50):
                    slow.send(msgpack.packb({"v": 1, "id": i + 100, "op": "embed",
                                             "text": f"never read {i}", "shm": True}))
                # (The first reply that cannot go drops the client's queued work again.)
                wait_for(lambda: (st := watcher.stats())["requests"].get("embed", 0) >= embeds + 50
                         and st["queue_depth"] == 0, "the embeds to be taken")
                assert shm_stats(watcher)["events"].get("allocations", 0) > allocations
                assert shm_stats(watcher)["leases"] == 1
                ring.check(held["shm"], held["shape"])
            finally:
                slow.close()
                ctx.term()
