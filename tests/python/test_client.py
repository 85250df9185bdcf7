"""The Python client end to end against a real worker on synthetic-A."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import rwkvd
from conftest import REPO


def test_hello_info_stats(worker):
    with worker.client() as c:
        h = c.hello()
        assert h["protocol"] == 1
        assert h["model"]["n_vocab"] == 1024
        assert h["model"]["state_shape"] == [3, 66, 256]
        assert c.shm_mapped
        info = c.info()
        assert info["device"].startswith("cpu")
        assert info["device_features"] == []
        assert info["memory"]["state_bytes"] == 3 * 66 * 256 * 4
        s = c.stats()
        assert "embed" in s and "latency_ms" in s and "prefix_cache" in s


def test_tokenize_roundtrip(worker):
    with worker.client() as c:
        toks = c.tokenize("Hello world")
        assert toks and all(0 <= t < 1024 for t in toks)
        assert c.detokenize(toks) == "Hello world"


def test_generate_plain_stream_and_seed(worker):
    with worker.client() as c:
        a = c.generate("Once upon a time", max_tokens=12, seed=7, temperature=0.9, top_k=40)
        b = c.generate("Once upon a time", max_tokens=12, seed=7, temperature=0.9, top_k=40)
        assert a.tokens == b.tokens and len(a.tokens) == 12
        assert a.finish_reason == "length" and a.seed == 7
        chunks = list(c.generate("Once upon a time", max_tokens=12, seed=7, temperature=0.9,
                                 top_k=40, stream=True))
        assert chunks[-1].result is not None
        assert [t for ch in chunks for t in ch.tokens] == a.tokens
        assert "".join(ch.text for ch in chunks) == a.text


def test_embed_one_many_and_tokens(worker):
    with worker.client() as c:
        one = c.embed("hello")
        assert one.shape == (256,) and one.dtype == np.float32
        many = c.embed(["hello", "world", [1, 2, 3]])
        assert many.shape == (3, 256)
        np.testing.assert_allclose(many[0], one, atol=1e-5)
        np.testing.assert_allclose(many[2], c.embed([1, 2, 3]), atol=1e-5)
    with worker.client(use_shm=False) as c:
        assert not c.shm_mapped
        np.testing.assert_allclose(c.embed("hello"), one, atol=1e-6)


def test_generate_all_on_forks_matches_one_at_a_time_in_fewer_steps(worker):
    fields = [" Subject:", " Sender:", " Date:"]
    opts = dict(max_tokens=6, temperature=0.0)
    with worker.client() as c:
        with c.session() as doc:
            doc.feed("A short document about the weather.")
            steps = lambda: c.stats()["generate"]["steps"]  # noqa: E731
            s0 = steps()
            one_at_a_time = []
            for f in fields:
                with doc.fork() as fork:
                    one_at_a_time.append(fork.generate(f, **opts).tokens)
            s1 = steps()
            forks = [doc.fork() for _ in fields]
            together = c.generate_all(fields, sessions=[f.id for f in forks], **opts)
            s2 = steps()
            for f in forks:
                f.close()
    assert [r.tokens for r in together] == one_at_a_time
    assert all(r.completion_tokens == 6 for r in together)
    assert s2 - s1 < s1 - s0, "the generations did not share engine steps"
    with pytest.raises(ValueError):
        c.generate_all(fields, sessions=[1])


def test_session_state_fork_set_state(worker):
    with worker.client() as c:
        with c.session() as s:
            assert s.feed("The cat") > 0
            st = s.state().copy()
            assert st.shape == (3, 66, 256)
            f = s.fork()
            s.feed(" sat")
            np.testing.assert_allclose(f.state(), st, atol=0)
            f.set_state(s.state())
            np.testing.assert_allclose(f.state(), s.state(), atol=0)
            f.close()
        # A stateless request carrying the state in equals continuing the session.
        with c.session() as s2:
            s2.feed("The cat")
            g1 = s2.generate(" then", max_tokens=6, temperature=0)
        g2 = c.generate(" then", max_tokens=6, temperature=0, state=st, return_state=True)
        assert g1.tokens == g2.tokens
        assert g2.state.shape == (3, 66, 256)


def test_leases_released_when_arrays_are_collected(worker):
    import gc
    with worker.client() as c:
        # Arrays of earlier tests' closed clients may still hold leases until the timeout.
        before = c.stats()["shm"]["leases"]
        arrs = [c.embed("x"), c.embed(["a", "b"])]
        view = arrs[1][1:]  # a view keeps the lease
        del arrs
        gc.collect()
        assert c.stats()["shm"]["leases"] == before + 1
        del view
        gc.collect()
        c.release_now()
        assert c.stats()["shm"]["leases"] == before


def test_cancel_a_stream(worker):
    with worker.client() as c:
        it = c.generate("x", max_tokens=4000, temperature=1.0, stream=True)
        next(it)
        it.close()  # sends cancel
        assert c.generate("y", max_tokens=2).completion_tokens == 2  # still served


def test_pip_install_offline(tmp_path):
    """The package builds and installs with no network (in-tree PEP 517 backend)."""
    venv = tmp_path / "venv"
    r = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("python3 -m venv unavailable: " + r.stderr[-200:])
    pip = venv / "bin" / "pip"
    r = subprocess.run([str(pip), "install", "--no-index", "--no-deps", str(REPO / "clients" / "python")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([str(venv / "bin" / "python"), "-c",
                        "import rwkvd, rwkvd.compat, sys; print(rwkvd.__file__)"], capture_output=True,
                       text=True, cwd=tmp_path)
    assert r.returncode == 0 and "site-packages" in r.stdout, r.stderr
    r = subprocess.run([str(venv / "bin" / "rwkvd-client"), "stats", "--help"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0 and "--info" in r.stdout, r.stderr  # the console script
