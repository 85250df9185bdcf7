"""The shared-memory ring end to end, on a worker with a 1 MiB ring: a full ring makes a result
wait briefly (shm_wait_ms, 20 ms) and then come inline; freed space is used again; a tensor
larger than the ring always comes inline. Every result is checked against the same result
through the ring."""
from __future__ import annotations

import gc
import time

import numpy as np
import pytest

from conftest import start_worker

SHM_WAIT_S = 0.020  # ServeOptions::shm_wait_ms


@pytest.fixture(scope="module")
def small_ring(synthetic_model):
    yield from start_worker(synthetic_model, "--shm-mb", "1")


def in_ring(client, arr: np.ndarray) -> bool:
    return np.shares_memory(arr, np.frombuffer(client._ring.mm, dtype=np.uint8))


def events(client) -> dict:
    return client.stats()["shm"]["events"]


def test_full_ring_waits_briefly_then_goes_inline(small_ring):
    with small_ring.client() as c, c.session() as s:
        s.feed("fill the ring " * 20)
        before = events(c)
        held = []
        for _ in range(64):  # a state is ~198 KiB: a handful fill 1 MiB
            st = s.state()
            if not in_ring(c, st):
                break
            held.append(st)  # holding the array holds its lease
        else:
            pytest.fail("64 states held and the 1 MiB ring never filled")
        assert len(held) >= 3, "the ring should hold several states before it is full"
        np.testing.assert_array_equal(st, held[0])  # same session, same state, now inline
        t0 = time.perf_counter()
        again = s.state()
        waited = time.perf_counter() - t0
        assert not in_ring(c, again)
        assert waited >= SHM_WAIT_S * 0.75, f"went inline after {waited * 1e3:.1f} ms, no wait"
        after = events(c)
        assert after.get("waits", 0) - before.get("waits", 0) >= 2
        assert after.get("inline_fallbacks", 0) - before.get("inline_fallbacks", 0) >= 2
        # Dropping the views releases their leases (piggy-backed on the next request): the ring
        # is used again.
        del held, st, again
        gc.collect()
        back = s.state()
        assert in_ring(c, back)


def test_a_tensor_larger_than_the_ring_goes_inline_at_once(small_ring):
    with small_ring.client() as c:
        c.hello()
        ring_bytes = c._ring.data_bytes
        n_vocab = c._hello["model"]["n_vocab"]
        n = ring_bytes // (n_vocab * 4) + 2  # all_logits of n tokens cannot fit
        tokens = [(7 * i + 3) % n_vocab for i in range(n)]
        before = events(c)
        big = c.forward(tokens, output="all_logits").output
        assert big.shape == (n, n_vocab) and big.nbytes > ring_bytes
        assert not in_ring(c, big)
        after = events(c)
        assert after.get("inline_too_large", 0) - before.get("inline_too_large", 0) == 1
        assert after.get("waits", 0) == before.get("waits", 0), "it waited for space it can't get"
        # The inline rows are the right ones: the last equals last_logits, which fits the ring.
        last = c.forward(tokens, output="last_logits").output
        assert in_ring(c, last)
        np.testing.assert_array_equal(big[-1], last[0])
