"""The Python package's conventions against a real worker: every error an RwkvdError,
idempotent close()s, embed of any number of inputs with normalize=, reprs that show ids and
shapes, py.typed, and `python -m rwkvd` mirroring the C++ CLI's client commands."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import rwkvd
from conftest import REPO
from rwkvd.client import EMBED_IN_FLIGHT


def test_use_after_close_is_a_closed_error(worker):
    c = worker.client()
    s = c.session()
    c.close()
    c.close()  # idempotent
    for call in (lambda: c.tokenize("x"), lambda: c.generate("x"), lambda: c.embed(["a", "b"]),
                 lambda: c.hello(), lambda: s.feed("x"), lambda: c.session()):
        with pytest.raises(rwkvd.ClosedError):
            call()
    s.close()  # a no-op once the client is closed


@pytest.mark.parametrize("endpoint", ["http://localhost:1234", "localhost:5555",
                                      "/tmp/w.sock", "ipc"])
def test_a_bad_endpoint_is_a_bad_endpoint_error(endpoint):
    with pytest.raises(rwkvd.BadEndpoint) as e:
        rwkvd.Client(endpoint).tokenize("x")
    assert isinstance(e.value, rwkvd.RwkvdError)
    assert endpoint in str(e.value)


def test_an_endpoint_zeromq_refuses_is_an_rwkvd_error():
    with pytest.raises(rwkvd.RwkvdError) as e:
        rwkvd.Client("tcp://:notaport").tokenize("x")
    assert "tcp://:notaport" in str(e.value)


def test_a_model_path_says_how_to_serve_it():
    with pytest.raises(rwkvd.BadEndpoint, match="rwkvd serve --model model.gguf"):
        rwkvd.Client("model.gguf")


def test_session_close_twice_and_ops_on_a_closed_session(worker):
    with worker.client() as c:
        s = c.session()
        s.close()
        s.close()
        with s:  # and via the context manager afterwards
            pass
        with pytest.raises(rwkvd.ClosedError):
            s.state()
        # A session the worker no longer has (closed through the raw op) closes quietly.
        t = c.session()
        c.call("session_close", session=t.id)
        t.close()


def test_argument_errors_are_rwkvd_errors(worker):
    with worker.client() as c:
        with pytest.raises(rwkvd.InvalidArgument):
            c.forward("x", output="nonsense")
        with pytest.raises(rwkvd.InvalidArgument):
            c.generate_all(["a"], stream=True)
        with pytest.raises(rwkvd.InvalidArgument):
            c.embed([])
        with pytest.raises(rwkvd.InvalidArgument):
            c.call("tokenize", text=object())  # cannot be packed
        assert c.tokenize("still serving")


def test_embed_takes_more_inputs_than_max_batch(worker):
    with worker.client() as c:
        max_batch = c.limits["max_batch"]  # 16 in this worker
        # More requests than are sent at once, too.
        texts = [f"text number {i}" for i in range((EMBED_IN_FLIGHT + 1) * max_batch + 5)]
        many = c.embed(texts)
        assert many.shape == (len(texts), c.model["n_embd"])
        for i in (0, max_batch, 2 * max_batch + 1, EMBED_IN_FLIGHT * max_batch + 1,
                  len(texts) - 1):
            np.testing.assert_allclose(many[i], c.embed(texts[i]), atol=1e-5)
        # Token lists, and one batch limited by max_tokens rather than by max_batch.
        long_lists = [[1 + (i % 50)] * 700 for i in range(8)]  # 5600 tokens > max_tokens 4096
        out = c.embed(long_lists)
        np.testing.assert_allclose(out[7], c.embed(long_lists[7]), atol=1e-5)


def test_embed_normalize(worker):
    with worker.client() as c:
        raw = c.embed(["alpha", "beta"])
        unit = c.embed(["alpha", "beta"], normalize=True)
        np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1.0, rtol=1e-5)
        np.testing.assert_allclose(unit, raw / np.linalg.norm(raw, axis=1, keepdims=True),
                                   rtol=1e-5)
        one = c.embed("alpha", normalize=True)
        assert one.shape == (c.model["n_embd"],)
        np.testing.assert_allclose(one, unit[0], rtol=1e-5)


def test_reprs_show_ids_and_shapes(worker):
    with worker.client() as c:
        assert "not connected" in repr(c)
        c.hello()
        r = repr(c)
        assert worker.endpoint in r and c._routing_id.decode() in r
        assert "n_layer=3" in r and "n_embd=256" in r
        with c.session() as s:
            assert f"id={s.id}" in repr(s) and "open" in repr(s)
            g = s.generate("x", max_tokens=2, return_state=False)
            assert "tokens=2" in repr(g) and f"session={s.id}" in repr(g)
        assert "closed" in repr(s)
        g = c.generate("x", max_tokens=2, return_state=True)
        assert "state=[3, 66, 256]" in repr(g) and "array(" not in repr(g)
        f = c.forward([1, 2, 3], output="all_logits")
        assert "output=[3, 1024]" in repr(f)
    assert "closed" in repr(c)


def test_results_are_read_only_and_np_array_gives_a_writable_copy(worker):
    with worker.client() as c:
        e = c.embed(["a", "b"])
        with pytest.raises(ValueError):
            e[0, 0] = 1.0
        w = np.array(e)
        w /= np.linalg.norm(w, axis=1, keepdims=True)  # what web_rwkv_py code does
        assert w.flags.writeable


def test_py_typed_ships_in_the_wheel_with_the_console_script(tmp_path):
    sys.path.insert(0, str(REPO / "clients" / "python" / "_build"))
    try:
        import rwkvd_build
    finally:
        sys.path.pop(0)
    name = rwkvd_build.build_wheel(str(tmp_path))
    import zipfile
    with zipfile.ZipFile(tmp_path / name) as z:
        names = z.namelist()
        assert "rwkvd/py.typed" in names and "rwkvd/aio.py" in names
        assert "rwkvd/__main__.py" in names
        entry = z.read("rwkvd-0.1.0.dist-info/entry_points.txt").decode()
    assert "rwkvd-client = rwkvd.cli:main" in entry


def _cli(worker, *args: str, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO / "clients" / "python"))
    return subprocess.run([sys.executable, "-m", "rwkvd", *args, "--endpoint", worker.endpoint],
                          capture_output=True, text=True, timeout=60, env=env, **kw)


def test_python_m_rwkvd_client_commands(worker, tmp_path):
    with worker.client() as c:
        toks = c.tokenize("Hello")
        want = c.generate("Once", max_tokens=6, seed=3)
        emb = np.array(c.embed(["a", "b"], normalize=True))
        with c.session() as s:
            s.feed("A prompt")
            st = np.array(s.state())
    r = _cli(worker, "tokenize", "--text", "Hello")
    assert r.returncode == 0 and json.loads(r.stdout) == toks, r.stderr
    r = _cli(worker, "tokenize-remote", "--tokens", ",".join(map(str, toks)), "--decode")
    assert r.stdout == "Hello"
    r = _cli(worker, "generate", "--text", "Once", "--max-tokens", "6", "--seed", "3")
    assert r.returncode == 0 and r.stdout == want.text + "\n", r.stderr
    assert "[length, 6 tokens, seed 3]" in r.stderr
    r = _cli(worker, "generate", "--text", "Once", "--max-tokens", "6", "--seed", "3", "--json")
    assert json.loads(r.stdout)["tokens"] == want.tokens
    r = _cli(worker, "embed", "--text", "a", "--text", "b", "--normalize")
    np.testing.assert_allclose(np.array(json.loads(r.stdout)), emb, rtol=1e-6)
    out = tmp_path / "st.f32"
    r = _cli(worker, "state", "--text", "A prompt", "--out", str(out))
    assert r.returncode == 0 and "state [3, 66, 256]" in r.stderr, r.stderr
    assert np.array_equal(np.fromfile(out, dtype="<f4").reshape(st.shape), st)
    r = _cli(worker, "stats", "--info")
    assert json.loads(r.stdout)["model"]["n_vocab"] == 1024
    r = _cli(worker, "generate")  # no prompt: a clear error, no traceback
    assert r.returncode == 1 and "give --text or --tokens" in r.stderr
    assert "Traceback" not in r.stderr
