"""rwkvd.compat (the web_rwkv_py face) against the plain client and the fixture references."""
from __future__ import annotations

import gc

import numpy as np
import pytest

from rwkvd import WorkerError
from rwkvd.compat import (BackedState, EmbeddingCache, Model, ModelInfo, RnnOption, Runner,
                          StateDevice)
from test_forward import CPU_TOL, manifest_tokens, reference, STEM
from test_shm import _chain

N_VOCAB, N_EMBD, STATE_SHAPE = 1024, 256, (3, 66, 256)


@pytest.fixture(scope="module")
def seq64():
    return manifest_tokens(f"{STEM}.logits.f32.bin")


@pytest.fixture
def model(worker):
    with Model(worker.endpoint, timeout=30) as m:
        yield m


@pytest.fixture
def plain(worker):
    with worker.client() as c:
        yield c


def long_tokens(n, seed=7):
    return [int(t) for t in np.random.default_rng(seed).integers(0, N_VOCAB, n)]


def test_info_encode_decode(model, plain):
    info = model.info()
    assert isinstance(info, ModelInfo)
    assert (info.num_layer, info.num_emb, info.num_vocab, info.head_size) == (3, 256, 1024, 64)
    assert info.num_head == 4 and info.state_shape == STATE_SHAPE and info.version == "V7"
    text = "Hello world, again."
    assert model.encode(text) == plain.tokenize(text)
    assert model.decode(model.encode(text)) == plain.detokenize(plain.tokenize(text)) == text
    assert model.decode(np.array(model.encode(text))) == text


def test_run_options_equal_plain_forward_and_llama(model, plain, seq64):
    expect = {o: plain.forward(seq64, output=o.value).output.copy() for o in RnnOption}
    shapes = {RnnOption.Last: (N_VOCAB,), RnnOption.Full: (64, N_VOCAB),
              RnnOption.EmbedLast: (N_EMBD,), RnnOption.EmbedFull: (64, N_EMBD)}
    for opt in RnnOption:
        model.clear_state()
        got = model.run(seq64, option=opt)
        assert got.shape == shapes[opt] and got.dtype == np.float32, opt
        np.testing.assert_array_equal(got, expect[opt].reshape(shapes[opt]), err_msg=opt.name)
    model.clear_state()
    full = model.run(seq64, token_chunk_size=128, option=RnnOption.Full)
    assert np.abs(full - reference("logits", N_VOCAB)).max() < CPU_TOL
    model.clear_state()
    hidden = model.run(seq64, option="EmbedFull")
    assert np.abs(hidden - reference("embd", N_EMBD)).max() < CPU_TOL
    model.clear_state()
    np.testing.assert_array_equal(model.run_full(seq64), full)
    with pytest.raises(ValueError):
        model.run([], option=RnnOption.Last)
    with pytest.raises(ValueError):
        model.run(seq64, option="Everything")
    with pytest.raises(ValueError):
        model.run(seq64, token_chunk_size=0)


@pytest.fixture(scope="module")
def unchunked(worker, seq64):
    """Every option's output and the final state, each run in one request, for two inputs."""
    out = {}
    with Model(worker.endpoint, timeout=30) as m:
        for toks in (seq64[:20], seq64 + long_tokens(36)):
            res = {}
            for opt in RnnOption:
                m.clear_state()
                res[opt] = np.array(m.run(toks, token_chunk_size=1000, option=opt))
            res["state"] = m.back_state().to_numpy().copy()
            out[len(toks)] = (toks, res)
    return out


@pytest.mark.parametrize("chunk,n", [(1, 20), (7, 100), (64, 100), (99, 100)])
def test_token_chunk_size_gives_identical_results(model, unchunked, chunk, n):
    toks, ref = unchunked[n]
    for opt in RnnOption:
        model.clear_state()
        got = model.run(toks, token_chunk_size=chunk, option=opt)
        np.testing.assert_array_equal(got, ref[opt], err_msg=opt.name)
    np.testing.assert_array_equal(model.back_state().to_numpy(), ref["state"])


def test_chunks_respect_worker_limits(model, worker):
    # The test worker allows 1 MiB messages: 256 rows of 1024 logits per reply. 300 tokens in
    # one request would be too_large; run() splits them whatever token_chunk_size says.
    assert model.chunk_size(1000, RnnOption.Full) == 256
    assert model.chunk_size(1000, RnnOption.EmbedFull) == 1000
    assert model.chunk_size(None, RnnOption.Last) == 128
    assert model.chunk_size(100000, RnnOption.Last) == 4096  # max_tokens
    toks = long_tokens(300)
    full = model.run(toks, token_chunk_size=1000, option=RnnOption.Full)
    assert full.shape == (300, N_VOCAB)
    with worker.client() as c, c.session() as s:
        with pytest.raises(WorkerError):
            s.forward(toks, output="all_logits")
        first = s.forward(toks[:200], output="all_logits").output
        np.testing.assert_array_equal(full[:200], first)


def test_run_advances_the_session_state_like_feed(model, plain, seq64):
    model.run(seq64[:40])
    model.run(seq64[40:], token_chunk_size=5)
    with plain.session() as s:
        s.feed(seq64)
        np.testing.assert_array_equal(model.back_state().to_numpy(), s.state())
        nxt = s.forward([5, 6]).output[0]
    np.testing.assert_array_equal(model.run([5, 6]), nxt)


def test_back_state_is_zero_copy_and_to_list_matches(model, seq64):
    model.run(seq64)
    st = model.back_state(StateDevice.Cpu)
    assert isinstance(st, BackedState) and st.shape == STATE_SHAPE
    arr = st.to_numpy()
    assert arr is st.to_numpy() and arr.dtype == np.float32 and arr.shape == STATE_SHAPE
    ring = model.client._ring.mm
    assert np.shares_memory(arr, np.frombuffer(ring, dtype=np.uint8))
    assert any(b is ring for b in _chain(arr)), "base chain does not reach the mapping"
    assert not arr.flags.writeable and not arr.flags.owndata
    assert np.asarray(st) is arr
    nested = st.to_list()
    assert len(nested) == 3 and len(nested[0]) == 66 and len(nested[0][0]) == 256
    np.testing.assert_array_equal(np.array(nested, dtype=np.float32), arr)
    flat = st.to_list(flat=True)
    assert len(flat) == 3 * 66 * 256
    np.testing.assert_array_equal(np.array(flat, dtype=np.float32), arr.reshape(-1))
    # ... and equals what the plain client API reads from the same session (through the runner's
    # own connection: sessions belong to the client that opened them).
    from rwkvd import Session
    np.testing.assert_array_equal(arr, Session(model.client, model.session.id).state())
    owned = st.copy()
    assert owned.to_numpy().flags.owndata and np.array_equal(owned.to_numpy(), arr)


def test_load_state_and_clear_state(model, seq64):
    model.run(seq64[:32])
    saved = model.back_state().copy()
    after = model.run(seq64[32:]).copy()
    with model.runner() as other:
        assert other.session.id != model.session.id
        for form in (saved, saved.to_numpy(), saved.to_list(), saved.to_list(flat=True)):
            other.load_state(form)
            np.testing.assert_array_equal(other.run(seq64[32:]), after)
        with pytest.raises(ValueError):
            other.load_state(np.zeros(10, np.float32))
    with model.runner(state=saved) as third:
        np.testing.assert_array_equal(third.run(seq64[32:]), after)
    model.clear_state()
    assert not model.back_state().to_numpy().any()
    assert not model.init_state().to_numpy().any()
    with Runner(model.client) as fresh:
        np.testing.assert_array_equal(fresh.run(seq64), model.run(seq64))


def test_inline_client_gives_the_same_results(worker, model, seq64):
    with Model(worker.endpoint, use_shm=False) as m:
        assert not m.client.shm_mapped
        for opt in (RnnOption.Last, RnnOption.EmbedFull):
            model.clear_state()
            m.clear_state()
            np.testing.assert_array_equal(m.run(seq64, option=opt), model.run(seq64, option=opt))
        st = m.back_state().to_numpy()
        assert st.shape == STATE_SHAPE
        np.testing.assert_array_equal(st, model.back_state().to_numpy())
        np.testing.assert_array_equal(m.embed(seq64), model.embed(seq64))


def test_embed_is_stateless_and_equals_the_plain_client(model, plain, seq64):
    model.run(seq64[:10])
    before = model.back_state().to_numpy().copy()
    emb = model.embed(seq64, last_only=True)
    assert emb.shape == (N_EMBD,)
    np.testing.assert_array_equal(emb, plain.embed(seq64))
    full = model.embed(seq64, last_only=False)
    assert full.shape == (64, N_EMBD)
    np.testing.assert_array_equal(full, plain.forward(seq64, output="all_embeddings").output)
    assert np.abs(full - reference("embd", N_EMBD)).max() < CPU_TOL
    # Chunked: a scratch session, same numbers.
    np.testing.assert_array_equal(model.embed(seq64, token_chunk_size=9), emb)
    np.testing.assert_array_equal(model.embed(seq64, token_chunk_size=9, last_only=False), full)
    # Text goes in directly (short) or tokenized and chunked (long).
    text = "An example document."
    np.testing.assert_array_equal(model.embed(text), plain.embed(text))
    np.testing.assert_array_equal(model.embed(text, token_chunk_size=3), plain.embed(text))
    np.testing.assert_array_equal(model.back_state().to_numpy(), before)  # untouched


def test_embed_batch_equals_the_plain_client(model, plain, seq64):
    docs = [seq64, seq64[:5], long_tokens(50), "a text input", [7]]
    many = model.embed_batch(docs)
    assert many.shape == (5, N_EMBD)
    np.testing.assert_array_equal(many, plain.embed(docs))
    # Long ones chunked, short ones batched: the same rows.
    np.testing.assert_array_equal(model.embed_batch(docs, token_chunk_size=8), many)
    ragged = model.embed_batch(docs[:3], last_only=False)
    assert [r.shape for r in ragged] == [(64, N_EMBD), (5, N_EMBD), (50, N_EMBD)]
    np.testing.assert_array_equal(ragged[0], model.embed(seq64, last_only=False))
    # More inputs than the worker's max_batch (16 here) take several requests.
    big = [long_tokens(4, seed=i) for i in range(40)]
    np.testing.assert_array_equal(model.embed_batch(big),
                                  np.concatenate([plain.embed(big[:16]), plain.embed(big[16:32]),
                                                  plain.embed(big[32:])]))
    with pytest.raises(ValueError):
        model.embed_batch([])


def test_embedding_cache(worker, plain, seq64):
    cache = EmbeddingCache(max_bytes=1 << 20, max_entries=8)
    with Model(worker.endpoint, cache=cache) as m:
        a = m.embed(seq64)
        assert cache.stats()["misses"] == 1 and cache.hits == 0
        b = m.embed(seq64)
        assert b is a and cache.hits == 1
        np.testing.assert_array_equal(a, plain.embed(seq64))
        # An owned read-only copy, not a view of the ring (it outlives leases).
        assert not a.flags.writeable and not np.shares_memory(
            a, np.frombuffer(m.client._ring.mm, dtype=np.uint8))
        assert m.embed(np.array(seq64)) is a  # same tokens, any container
        full = m.embed(seq64, last_only=False)
        assert full.shape == (64, N_EMBD) and m.embed(seq64, last_only=False) is full
        # A batch uses and fills the cache; its rows equal the single results.
        batch = m.embed_batch([seq64, seq64[:3], "x y z"])
        np.testing.assert_array_equal(batch[0], a)
        assert m.embed(seq64[:3]) is m.embed(seq64[:3])
        hits = cache.hits
        again = m.embed_batch([seq64, seq64[:3], "x y z"])
        assert cache.hits == hits + 3
        np.testing.assert_array_equal(again, batch)
        # A runner from the model shares the cache.
        with m.runner() as r:
            assert r.embed(seq64) is a
    # LRU bounds: entries and bytes.
    small = EmbeddingCache(max_bytes=3 * 1024, max_entries=2)
    small.put("a", np.ones(256, np.float32))
    small.put("b", np.ones(256, np.float32))
    assert small.get("a") is not None  # a is now the most recent
    small.put("c", np.ones(256, np.float32))
    assert "b" not in small and "a" in small and "c" in small and small.evictions == 1
    small.put("big", np.ones(1024, np.float32))  # 4 KiB > max_bytes: returned, not kept
    assert "big" not in small and len(small) == 2 and small.nbytes == 2048
    small.max_entries = 10
    small.put("d", np.ones(256, np.float32))  # 3 KiB: still fits
    small.put("e", np.ones(256, np.float32))  # 4 KiB: the oldest goes
    assert len(small) == 3 and small.nbytes <= small.max_bytes and "a" not in small
    small.clear()
    assert len(small) == 0 and small.nbytes == 0
    with pytest.raises(ValueError):
        EmbeddingCache(max_bytes=0)


def test_results_release_their_leases_and_close_frees_the_session(worker, seq64):
    with worker.client() as c:
        c.forward([1])
        sessions = c.stats()["sessions"]
    with Model(worker.endpoint) as m:
        gc.collect()
        m.client.release_now()
        before = m.client.stats()["shm"]["leases"]
        outs = [m.run(seq64, option=o) for o in RnnOption] + [m.back_state(), m.embed(seq64)]
        assert m.client.stats()["shm"]["leases"] > before
        del outs
        gc.collect()
        m.client.release_now()
        assert m.client.stats()["shm"]["leases"] == before
        with m.runner() as r:
            r.run([1])  # an engine round trip: the gauges include the opens
            assert m.client.stats()["sessions"] == sessions + 2
    with worker.client() as c:
        c.forward([1])
        assert c.stats()["sessions"] == sessions


def test_model_takes_endpoint_as_documented_and_says_how_to_serve_a_model_file(worker):
    import rwkvd
    with Model(endpoint=worker.endpoint, timeout=30) as m:
        assert m.info().num_vocab == N_VOCAB
        assert "session=" in repr(m) and "num_emb=256" in repr(m)
    for path in ("model.gguf", "weights/rwkv7-0.1B.st"):
        with pytest.raises(rwkvd.BadEndpoint, match="rwkvd serve --model") as e:
            Model(path)
        assert isinstance(e.value, rwkvd.RwkvdError)


def test_a_closed_runner_raises_an_rwkvd_error(worker):
    import rwkvd
    m = Model(worker.endpoint, timeout=30)
    r = m.runner()
    r.close()
    r.close()
    with pytest.raises(rwkvd.ClosedError):
        r.run([1, 2, 3])
    m.close()
    m.close()
    for call in (lambda: m.back_state(), lambda: m.embed([1, 2]), lambda: m.encode("x")):
        with pytest.raises(rwkvd.RwkvdError):
            call()
