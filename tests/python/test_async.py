"""rwkvd.AsyncClient against a real worker: the operations of Client as coroutines, many in
flight at once on one client, streaming as an async iterator, sessions and states."""
from __future__ import annotations

import asyncio

import numpy as np
import pytest

import rwkvd


def run(coro):
    return asyncio.run(coro)


def test_generate_stream_embed_tokenize_match_the_blocking_client(worker):
    with worker.client() as c:
        want = c.generate("Once upon a time", max_tokens=10, seed=5, temperature=0.8)
        emb = np.array(c.embed(["one", "two", "three"]))
        toks = c.tokenize("Hello")

    async def main():
        async with rwkvd.AsyncClient(worker.endpoint, timeout=30) as a:
            g = await a.generate("Once upon a time", max_tokens=10, seed=5, temperature=0.8)
            chunks = [ch async for ch in await a.generate("Once upon a time", max_tokens=10,
                                                         seed=5, temperature=0.8, stream=True)]
            e = await a.embed(["one", "two", "three"])
            unit = await a.embed(["one", "two", "three"], normalize=True)
            t = await a.tokenize("Hello")
            text = await a.detokenize(t)
            f = await a.forward([1, 2, 3], output="all_logits")
            info, stats = await a.info(), await a.stats()
            return g, chunks, np.array(e), unit, t, text, f.output.shape, info, stats, repr(a)

    g, chunks, e, unit, t, text, fshape, info, stats, r = run(main())
    assert g.tokens == want.tokens
    assert [tok for ch in chunks for tok in ch.tokens] == want.tokens
    assert chunks[-1].result is not None and chunks[-1].result.completion_tokens == 10
    np.testing.assert_allclose(e, emb, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1.0, rtol=1e-5)
    assert t == toks and text == "Hello"
    assert fshape == (3, 1024)
    assert info["model"]["n_vocab"] == 1024 and "embed" in stats
    assert "AsyncClient" in r and "n_embd=256" in r


def test_many_coroutines_in_flight_on_one_client(worker):
    prompts = [f"prompt {i}" for i in range(12)]
    with worker.client() as c:
        want = [c.generate(p, max_tokens=5, temperature=0).tokens for p in prompts]
        want_emb = [np.array(c.embed(p)) for p in prompts]

    async def main():
        async with rwkvd.AsyncClient(worker.endpoint, timeout=30) as a:
            gens = [a.generate(p, max_tokens=5, temperature=0) for p in prompts]
            embs = [a.embed(p) for p in prompts]
            streams = [a.generate(p, max_tokens=5, temperature=0, stream=True) for p in prompts]

            async def drain(s):
                return [t async for ch in await s for t in ch.tokens]
            out = await asyncio.gather(*gens, *embs, *(drain(s) for s in streams))
            return out, await a.generate_all(prompts, max_tokens=5, temperature=0)

    out, together = run(main())
    n = len(prompts)
    assert [g.tokens for g in out[:n]] == want
    for got, exp in zip(out[n:2 * n], want_emb):
        np.testing.assert_allclose(got, exp, atol=1e-5)
    assert out[2 * n:] == want
    assert [g.tokens for g in together] == want


def test_sessions_fork_share_and_state(worker):
    async def main():
        async with rwkvd.AsyncClient(worker.endpoint, timeout=30) as a, \
                rwkvd.AsyncClient(worker.endpoint, timeout=30) as other:
            async with await a.session() as s:
                assert await s.feed("The cat") > 0
                st = np.array(await s.state())
                f = await s.fork()
                await s.feed(" sat")
                assert np.array_equal(await f.state(), st)
                token = await s.share()
                shared = await other.fork_shared(token)
                assert np.array_equal(await shared.state(), await s.state())
                await s.unshare()
                with pytest.raises(rwkvd.WorkerError) as e:
                    await other.fork_shared(token)
                assert e.value.code == rwkvd.ErrorCode.UNKNOWN_SESSION
                await f.set_state(await s.state())
                assert np.array_equal(await f.state(), await s.state())
                g1 = await f.generate(" then", max_tokens=4, temperature=0)
                emb = await shared.embed(" more")
                assert emb.shape == (256,)
                fw = await shared.forward(" x", output="last_embedding")
                assert fw.output.shape == (1, 256)
                await f.close()
                await f.close()  # idempotent
                with pytest.raises(rwkvd.ClosedError):
                    await f.feed("x")
                await shared.close()
            # A stateless generate from the saved state continues it as the session did.
            g2 = await a.generate(" sat then", max_tokens=4, temperature=0, state=st,
                                  return_state=True)
            async with await a.session(st) as s2:
                g3 = await s2.generate(" sat then", max_tokens=4, temperature=0)
            return g1, g2, g3

    g1, g2, g3 = run(main())
    assert g2.tokens == g3.tokens and g1.completion_tokens == 4
    assert g2.state.shape == (3, 66, 256)


def test_leaving_a_stream_early_cancels_it_and_errors_are_rwkvd_errors(worker):
    async def main():
        a = rwkvd.AsyncClient(worker.endpoint, timeout=30)
        it = await a.generate("x", max_tokens=4000, stream=True)
        await it.__anext__()
        await it.aclose()  # sends cancel
        g = await a.generate("y", max_tokens=2)
        with pytest.raises(rwkvd.InvalidArgument):
            await a.forward("x", output="nonsense")
        with pytest.raises(rwkvd.WorkerError):
            await a.call("no_such_op")
        a.close()
        a.close()
        with pytest.raises(rwkvd.ClosedError):
            await a.tokenize("x")
        return g

    assert run(main()).completion_tokens == 2
    with worker.client() as c:
        assert c.tokenize("still serving")


def test_one_async_client_belongs_to_one_event_loop(worker):
    a = rwkvd.AsyncClient(worker.endpoint, timeout=30)
    try:
        assert run(a.tokenize("first loop"))
        with pytest.raises(rwkvd.WrongLoop):
            run(a.tokenize("second loop"))
    finally:
        a.close()
