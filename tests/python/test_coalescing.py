"""Embed requests from 8 processes at once run as fewer, larger dispatches, with the same
numbers as when sent one at a time."""
from __future__ import annotations

import multiprocessing as mp

import numpy as np
import pytest

import rwkvd
from conftest import start_worker

N = 8
TEXTS = [f"process {i} says something {'long ' * i}" for i in range(N)]


@pytest.fixture(scope="module")
def slow_window_worker(synthetic_model):
    # A 150 ms window: the 8 processes (released by one barrier) land inside it on a busy machine.
    yield from start_worker(synthetic_model, "--batch-window-us", "150000")


def _embed_in_child(endpoint, i, barrier, out):
    with rwkvd.Client(endpoint, timeout=30) as c:
        c.hello()
        barrier.wait(timeout=30)
        out.put((i, c.embed(TEXTS[i]).copy()))


def test_concurrent_embeds_coalesce(slow_window_worker):
    w = slow_window_worker
    with w.client() as c:
        before = c.stats()["embed"]
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(N)
    out = ctx.Queue()
    procs = [ctx.Process(target=_embed_in_child, args=(w.endpoint, i, barrier, out)) for i in range(N)]
    for p in procs:
        p.start()
    together = dict(out.get(timeout=60) for _ in range(N))
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    with w.client() as c:
        after = c.stats()["embed"]
        dispatches = after["dispatches"] - before["dispatches"]
        print(f"\n8 concurrent embeds -> {dispatches} dispatch(es); "
              f"largest batch {after['batch_sequences']['max']} sequences")
        assert dispatches < N, "no coalescing happened"
        assert after["batch_sequences"]["max"] >= 2
        # One at a time (each waits out the window alone): the same numbers.
        for i in range(N):
            alone = c.embed(TEXTS[i])
            np.testing.assert_allclose(together[i], alone, rtol=0, atol=1e-5)
        final = c.stats()["embed"]
        assert final["dispatches"] - after["dispatches"] == N
