"""A state comes to numpy through the shared-memory ring with no copy; timing vs inline."""
from __future__ import annotations

import gc
import os
import time

import numpy as np

from rwkvd import _shm


def _chain(arr):
    out = []
    obj = arr
    while obj is not None:
        out.append(obj)
        # ndarray -> .base; memoryview -> .obj (np.frombuffer keeps a memoryview of the mmap)
        obj = obj.obj if isinstance(obj, memoryview) else getattr(obj, "base", None)
    return out


def test_state_is_a_view_of_the_segment(worker):
    with worker.client() as c:
        with c.session() as s:
            s.feed("A prompt long enough to leave a non-trivial state behind. " * 4)
            st = s.state()
            assert st.shape == (3, 66, 256) and st.dtype == np.float32
            ring = c._ring.mm
            assert np.shares_memory(st, np.frombuffer(ring, dtype=np.uint8))
            assert any(b is ring for b in _chain(st)), "base chain does not reach the mapping"
            assert not st.flags.writeable  # mapped read-only: nobody scribbles on the ring
            assert not st.flags.owndata
            # Sessions belong to their client: the inline client gets its own with this state.
            with worker.client(use_shm=False) as inline, inline.session(st) as s2:
                other = inline.call("session_state", session=s2.id)
                assert "data" in other["state"]  # really inline
                np.testing.assert_array_equal(inline._tensor(other["state"]), st)


def _time_states(client, session, n):
    t0 = time.perf_counter()
    for _ in range(n):
        st = session.state()
        float(st[0, 0, 0])  # touch it
        del st
    return (time.perf_counter() - t0) / n


def test_state_timing_shm_vs_inline(worker, capsys):
    n = 200
    with worker.client() as shm_client, worker.client(use_shm=False) as inline_client:
        with shm_client.session() as s:
            s.feed("timing " * 50)
            # Sessions belong to their client: the inline one reads its own copy of the state.
            s_inline = inline_client.session(s.state())
            for _ in range(5):  # warm up both paths
                _time_states(shm_client, s, 1)
                _time_states(inline_client, s_inline, 1)
            gc.collect()
            t_shm = _time_states(shm_client, s, n)
            t_inline = _time_states(inline_client, s_inline, n)
            nbytes = 3 * 66 * 256 * 4
            with capsys.disabled():
                print(f"\nstate -> numpy ({nbytes / 1024:.0f} KiB, mean of {n}): "
                      f"shm {t_shm * 1e6:.0f} us, inline {t_inline * 1e6:.0f} us "
                      f"({t_inline / t_shm:.2f}x)")
            assert shm_client.stats()["shm"]["events"].get("inline_fallbacks", 0) == 0


def test_client_rejects_shm_references_outside_the_ring(worker):
    """A reply's shm reference is checked before numpy is pointed at the mapping."""
    import pytest
    from rwkvd import ErrorCode, ProtocolViolation, WorkerError

    with worker.client() as c:
        c.hello()
        r = c.call("embed", text="reference")
        t = r["embeddings"]
        ref, shape = dict(t["shm"]), t["shape"]
        ring = c._ring
        ring.check(ref, shape)  # the real one passes
        end = ring.data_offset + ring.data_bytes
        bad = [
            dict(ref, offset=8),                               # inside the header
            dict(ref, offset=end),                             # past the data area
            dict(ref, offset=end - 4, bytes=ref["bytes"]),     # runs off the end
            dict(ref, offset=2 ** 64 - 8),                     # would wrap in C
            dict(ref, offset=ref["offset"] + 2),               # misaligned
            dict(ref, bytes=ref["bytes"] + 4),                 # not the shape's size
            dict(ref, slot=ring.n_slots),                      # no such slot
            dict(ref, slot=-1),
            dict(ref, lease="x"),                              # malformed
        ]
        for b in bad:
            with pytest.raises(ProtocolViolation):
                ring.check(b, shape)
        with pytest.raises(ProtocolViolation):
            ring.check(ref, [2 ** 62, 2])  # a shape that does not match the bytes
        for stale in (dict(ref, generation=ref["generation"] + 1), dict(ref, lease=ref["lease"] ^ 1)):
            with pytest.raises(WorkerError) as e:
                ring.check(stale, shape)
            assert e.value.code == ErrorCode.UNKNOWN_LEASE
        # And through the client: a bad reference in a reply raises, never reads.
        with pytest.raises(ProtocolViolation):
            c._tensor({"dtype": "f32", "shape": shape, "shm": dict(ref, offset=end)})
        assert ref["lease"] in c._pending  # the client gives a lease it could not use back
        c.release_now()


def _inputs_left():
    return sorted(n for n in os.listdir("/dev/shm") if n.startswith(_shm.INPUT_PREFIX))


def test_large_states_go_as_shared_memory_inputs(worker, monkeypatch):
    """A state over shm_input_min_bytes goes through an object of the client's (then removed);
    the worker reads it as it would the bytes inline."""
    written = []
    real_write = _shm.write_input
    monkeypatch.setattr(_shm, "write_input", lambda data: written.append(len(data))
                        or real_write(data))
    with worker.client() as c:
        with c.session() as s:
            s.feed("A document to analyse, long enough for a state. " * 3)
            st = np.array(s.state())
        want = c.generate(" Subject:", max_tokens=4, temperature=0, state=st).tokens
        assert written == [], "under 1 MiB: inline"
        before = _inputs_left()
        c.shm_input_min_bytes = 0
        assert c.generate(" Subject:", max_tokens=4, temperature=0, state=st).tokens == want
        with c.session(st) as s2:
            assert c.generate(" Subject:", max_tokens=4, temperature=0,
                              session=s2.id).tokens == want
            s2.set_state(st)
        assert written == [st.nbytes] * 3
        assert _inputs_left() == before, "each input object is removed after its reply"


def _resident_kib(path: str, perms: str) -> int:
    """Rss of this process's mapping of `path` with `perms` (e.g. "r--s"), from /proc/self/smaps."""
    rss, current = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5:  # a mapping's first line
                current = fields[1] == perms and len(fields) >= 6 and fields[5] == path
            elif current and fields[0] == "Rss:":
                rss += int(fields[1])
    return rss


def _fake_ring(name: str, size: int) -> str:
    path = os.path.join("/dev/shm", name)
    with open(path, "wb") as f:
        f.write(_shm.HEADER.pack(_shm.MAGIC, _shm.VERSION, _shm.HEADER.size, size, 4096,
                                 size - 4096, 1, _shm.SLOT.size, os.getpid()))
        f.write(bytes(size - _shm.HEADER.size))
    return path


def test_ring_pages_are_mapped_in_the_background(monkeypatch):
    size = 8 << 20
    path = _fake_ring(f"rwkvd-test-{os.getpid()}-populate", size)
    try:
        monkeypatch.setenv("RWKVD_SHM_POPULATE", "0")
        off = _shm.Ring(os.path.basename(path))
        assert off.populating is None
        monkeypatch.delenv("RWKVD_SHM_POPULATE")
        ring = _shm.Ring(os.path.basename(path))
        assert ring.populating is not None
        ring.populating.join(30)
        # Every page of the new mapping is resident before anything read it (the header check
        # read the first page of the mappings only).
        assert _resident_kib(path, "r--s") >= (size // 1024) + 4
    finally:
        os.unlink(path)
