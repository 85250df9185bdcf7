"""The `forward` op (logits / hidden states without sampling) through the plain client, against
the fixture's llama.cpp outputs and the worker's other ops."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List

import numpy as np
import pytest

import rwkvd
from conftest import fixtures_root, require

# tests/engine/cpu_forward_test.cpp: the CPU reference vs llama.cpp on synthetic-A F32.
CPU_TOL = 1.5e-5
STEM = "synthetic-A.f32.seq64.llama"


def manifest_tokens(name: str) -> List[int]:
    manifest = require(fixtures_root() / "rwkv7" / "manifest.json", "fixture manifest")
    for f in json.loads(Path(manifest).read_text())["files"]:
        if f["file"] == name:
            return [int(t) for t in f["tokens"]]
    raise KeyError(name)


def reference(kind: str, width: int) -> np.ndarray:
    path = require(fixtures_root() / "rwkv7" / f"{STEM}.{kind}.f32.bin", "fixture")
    return np.fromfile(path, dtype="<f4").reshape(-1, width)


@pytest.fixture(scope="module")
def seq64() -> List[int]:
    return manifest_tokens(f"{STEM}.logits.f32.bin")


def test_all_positions_match_llama(worker, seq64):
    with worker.client() as c:
        lg = c.forward(seq64, output="all_logits")
        assert lg.output.shape == (64, 1024) and lg.output.dtype == np.float32
        assert lg.n_tokens == 64 and lg.session is None
        assert np.abs(lg.output - reference("logits", 1024)).max() < CPU_TOL
        em = c.forward(seq64, output="all_embeddings").output
        assert em.shape == (64, 256)
        assert np.abs(em - reference("embd", 256)).max() < CPU_TOL
        # Through the ring: a view, not a copy.
        assert c.shm_mapped and not lg.output.flags.owndata and not lg.output.flags.writeable


def test_last_outputs_equal_last_rows_and_other_ops(worker, seq64):
    with worker.client() as c:
        full = c.forward(seq64, output="all_logits").output
        last = c.forward(seq64).output  # default: last_logits
        assert last.shape == (1, 1024)
        np.testing.assert_array_equal(last[0], full[-1])
        emb = c.forward(seq64, output="last_embedding").output
        assert emb.shape == (1, 256)
        np.testing.assert_allclose(emb[0], c.embed(seq64), atol=1e-6)
        # Greedy generation picks the argmax of the same logits.
        g = c.generate(seq64, max_tokens=1, temperature=0)
        assert g.tokens == [int(np.argmax(last[0]))]


def test_session_forward_continues_and_splits_like_one_request(worker, seq64):
    with worker.client() as c:
        whole = c.forward(seq64, output="all_logits").output.copy()
        with c.session() as s:
            parts = []
            for i in range(0, 64, 24):
                r = s.forward(seq64[i:i + 24], output="all_logits")
                assert r.session == s.id and r.position == min(i + 24, 64)
                parts.append(r.output.copy())
            np.testing.assert_allclose(np.concatenate(parts), whole, atol=1e-5)
            st = s.state().copy()
        # A stateless forward from that state, returning the state, equals the session going on.
        with c.session() as s2:
            s2.feed(seq64)
            np.testing.assert_allclose(s2.state(), st, atol=1e-6)
            on_session = s2.forward([1, 2, 3], output="last_logits").output.copy()
            after = s2.state().copy()
        r = c.forward([1, 2, 3], state=st, return_state=True)
        np.testing.assert_allclose(r.output, on_session, atol=1e-6)
        np.testing.assert_allclose(r.state, after, atol=1e-6)


def test_forward_validation(worker):
    with worker.client() as c:
        with pytest.raises(ValueError):
            c.forward([1], output="everything")
        cases = [
            (dict(tokens=[1], output="everything"), rwkvd.ErrorCode.BAD_VALUE),
            (dict(tokens=[1], output=3), rwkvd.ErrorCode.BAD_TYPE),
            (dict(inputs=[[1]]), rwkvd.ErrorCode.UNKNOWN_FIELD),
            (dict(tokens=[1], max_tokens=3), rwkvd.ErrorCode.UNKNOWN_FIELD),
            (dict(), rwkvd.ErrorCode.MISSING_FIELD),
            (dict(tokens=[]), rwkvd.ErrorCode.BAD_VALUE),
            (dict(tokens=[1024]), rwkvd.ErrorCode.BAD_TOKEN),
            (dict(tokens=[1], state=b"\0" * 8), rwkvd.ErrorCode.BAD_STATE),
            (dict(tokens=[1], session=987654321), rwkvd.ErrorCode.UNKNOWN_SESSION),
            # 300 x 1024 floats = 1.2 MB > the test worker's 1 MiB max_message_bytes.
            (dict(tokens=[1] * 300, output="all_logits"), rwkvd.ErrorCode.TOO_LARGE),
        ]
        for fields, code in cases:
            with pytest.raises(rwkvd.WorkerError) as e:
                c.call("forward", **fields)
            assert e.value.code == code, (fields, e.value)
        limit = c.limits["max_message_bytes"] // (4 * 1024)
        assert c.forward([1] * limit, output="all_logits").output.shape == (limit, 1024)
        # The same tokens fit as embeddings (4x narrower) and as last logits.
        assert c.forward([1] * 300, output="all_embeddings").output.shape == (300, 256)
        assert c.forward([1] * 300).output.shape == (1, 1024)
        assert c.stats()["requests"]["forward"] >= len(cases)
