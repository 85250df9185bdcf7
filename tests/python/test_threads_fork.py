"""One Client shared by threads, and a Client inherited by fork() children, against a real
worker: calls from several threads take turns and each gets its own reply; a forked child gets
WrongProcess at once instead of a hang; a Client nobody closed is collected without one."""
from __future__ import annotations

import multiprocessing as mp
import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import rwkvd
from conftest import REPO


def test_threads_sharing_one_client_each_get_their_own_replies(worker):
    texts = [f"thread {i} asks about {'x' * i}" for i in range(4)]
    with worker.client() as c:
        expected = [(c.tokenize(t), np.array(c.embed(t))) for t in texts]
        errors, done = [], []

        def run(i: int) -> None:
            try:
                for _ in range(25):
                    assert c.tokenize(texts[i]) == expected[i][0]
                    assert np.array_equal(c.embed(texts[i]), expected[i][1])
                    g = c.generate(texts[i], max_tokens=3, temperature=0)
                    assert g.completion_tokens == 3
                done.append(i)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))

        threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not errors, errors[:3]
        assert sorted(done) == [0, 1, 2, 3]
        assert c.tokenize("still fine") == c.tokenize("still fine")


def test_a_stream_read_in_one_thread_while_another_thread_calls(worker):
    with worker.client() as c:
        alone = c.generate("a long story", max_tokens=40, temperature=0).tokens
        stop = threading.Event()
        other = []

        def calls() -> None:
            while not stop.is_set():
                other.append(c.tokenize("meanwhile"))

        t = threading.Thread(target=calls)
        t.start()
        try:
            chunks = list(c.generate("a long story", max_tokens=40, temperature=0, stream=True))
        finally:
            stop.set()
            t.join(timeout=30)
        assert [tok for ch in chunks for tok in ch.tokens] == alone
        assert other and all(o == other[0] for o in other)


def test_a_call_inside_a_stream_loop_loses_no_chunk(worker):
    with worker.client() as c:
        alone = c.generate("nested", max_tokens=20, temperature=0).tokens
        got = []
        for ch in c.generate("nested", max_tokens=20, temperature=0, stream=True):
            got.extend(ch.tokens)
            # Another request while the stream is in flight: its steps interleave with the
            # stream's, whose chunks arrive meanwhile.
            assert c.generate("inner", max_tokens=4, temperature=0).completion_tokens == 4
        assert got == alone


def _use_inherited(c: rwkvd.Client, out) -> None:
    t = time.monotonic()
    try:
        c.tokenize("from the child")
        out.put(("served", time.monotonic() - t))
    except rwkvd.WrongProcess as e:
        c.close()  # a no-op in the child: must not hang on the parent's context
        out.put(("WrongProcess", time.monotonic() - t, str(e)))
    except Exception as e:  # noqa: BLE001
        out.put(("other", repr(e)))


def _own_client(endpoint: str, out) -> None:
    with rwkvd.Client(endpoint, timeout=10) as c:
        out.put(("own", c.tokenize("own client")))


def test_a_forked_child_gets_wrong_process_at_once_and_can_make_its_own(worker):
    ctx = mp.get_context("fork")
    with worker.client(timeout=10) as c:
        want = c.tokenize("own client")
        out = ctx.Queue()
        procs = [ctx.Process(target=_use_inherited, args=(c, out)) for _ in range(3)]
        procs.append(ctx.Process(target=_own_client, args=(worker.endpoint, out)))
        for p in procs:
            p.start()
        results = [out.get(timeout=30) for _ in procs]
        for p in procs:
            p.join(timeout=30)
            assert p.exitcode == 0, "a child hung or crashed"
        inherited = [r for r in results if r[0] != "own"]
        assert all(r[0] == "WrongProcess" for r in inherited), inherited
        assert all(r[1] < 1.0 for r in inherited)
        assert "fork" in inherited[0][2]
        assert ("own", want) in results
        assert c.tokenize("own client") == want  # the parent's client is untouched


def test_a_client_collected_without_close_does_not_hang_the_collector(worker):
    # A Client in a reference cycle (as a test report's traceback makes) is finalised by the
    # cycle collector, which may finalise its context before its socket: terminating a context
    # there waited forever.
    code = textwrap.dedent(f"""
        import gc
        import rwkvd
        for _ in range(10):
            c = rwkvd.Client({worker.endpoint!r}, timeout=10)
            c.tokenize("x")
            c.me = c
            del c
            gc.collect()
        print("collected")
    """)
    env = dict(os.environ, PYTHONPATH=str(REPO / "clients" / "python"))
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=30, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail("the garbage collector hung on an unclosed Client")
    assert r.returncode == 0 and "collected" in r.stdout, r.stderr


def test_arrays_kept_after_a_timeout_keep_their_bytes(synthetic_model):
    # After a timeout the client replaces its socket; it must stay reachable meanwhile, or the
    # worker's lease check (every --lease-timeout-s) finds it gone and frees the leases of the
    # arrays it still holds, for other requests to overwrite.
    from conftest import Worker
    w = Worker(synthetic_model, ["--lease-timeout-s", "1", "--shm-mb", "1"])
    try:
        with w.client(timeout=30) as c, w.client(timeout=30) as other:
            kept = c.embed(["kept"] * 4)
            want = np.array(kept)
            c.timeout = 0.3
            with pytest.raises(rwkvd.RequestTimeout):
                c.generate("slow", max_tokens=16000, temperature=0)  # longer than 0.3 s
            time.sleep(3.5)  # lease checks come and go while c makes no call
            for i in range(300):  # fill the 1 MiB ring over and over
                other.embed([f"other {i}"] * 4)
            assert np.array_equal(kept, want), "a kept array changed under its holder"
    finally:
        w.stop()
