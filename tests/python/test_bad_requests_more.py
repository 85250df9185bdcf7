"""More malformed requests (test_bad_requests.py has the first 31), each answered with its error
code while the worker keeps serving; and the bad requests that need a live lease or session, a
client dying mid-stream, and releases racing the work that uses a slot."""
from __future__ import annotations

import math
import signal

import msgpack
import numpy as np
import pytest

import rwkvd
from rwkvd import ErrorCode as E
from test_bad_requests import req
from test_faults import Background, python_child, wait_until

STATE = 3 * 66 * 256  # synthetic-A's state_floats
OTHER_STATE = 6 * 66 * 256  # a deeper model's (and still under the 1 MiB message cap)


def raw_with(op: str, key: str, raw_value: bytes) -> bytes:
    """A request whose `key` holds hand-made msgpack bytes (declared lengths we never send)."""
    head = msgpack.packb({"v": 1, "id": 99, "op": op})
    assert head[0] == 0x83
    return bytes([0x84]) + head[1:] + msgpack.packb(key) + raw_value


def state_bytes(n: int, value: float = 0.0, dtype: str = "<f4") -> bytes:
    return np.full(n, value, dtype=dtype).tobytes()


CASES = [
    # empty input
    ("empty frame", [b""], E.BAD_MESSAGE),
    ("nil", [msgpack.packb(None)], E.BAD_MESSAGE),
    ("empty tokens", [req("embed", tokens=[])], E.BAD_VALUE),
    ("empty inputs", [req("embed", inputs=[])], E.BAD_VALUE),
    ("empty text", [req("embed", text="")], E.BAD_VALUE),
    ("empty generate", [req("generate", tokens=[])], E.BAD_VALUE),
    ("empty feed", [req("session_feed", session=5, tokens=[])], E.BAD_VALUE),
    # not our msgpack
    ("duplicate key", [b"\x84" + msgpack.packb({"v": 1, "id": 99, "op": "info"})[1:]
                       + msgpack.packb("op") + msgpack.packb("info")], E.BAD_MESSAGE),
    ("integer key", [msgpack.packb({1: 2})], E.BAD_MESSAGE),
    ("extension type", [msgpack.packb({"v": 1, "id": 99, "op": "info",
                                       "x": msgpack.ExtType(5, b"ab")})], E.BAD_MESSAGE),
    # wrong field types
    ("op not a string", [msgpack.packb({"v": 1, "id": 99, "op": 5})], E.BAD_TYPE),
    ("version as string", [msgpack.packb({"v": "1", "id": 99, "op": "info"})], E.BAD_VERSION),
    ("negative id", [msgpack.packb({"v": 1, "id": -1, "op": "info"})], E.BAD_VALUE),
    ("session as string", [req("session_state", session="abc")], E.BAD_TYPE),
    ("stream as int", [req("generate", text="x", stream=1)], E.BAD_TYPE),
    ("shm as string", [req("info", shm="yes")], E.BAD_TYPE),
    ("leases as string", [req("release", leases="1,2")], E.BAD_TYPE),
    ("release of negatives", [req("info", release=[-1])], E.BAD_VALUE),
    ("input as map", [req("embed", inputs=[{"a": 1}])], E.BAD_TYPE),
    ("temperature as string", [req("generate", text="x", temperature="hot")], E.BAD_TYPE),
    ("stop as int", [req("generate", text="x", stop=5)], E.BAD_TYPE),
    ("float max_tokens", [req("generate", text="x", max_tokens=1.5)], E.BAD_TYPE),
    ("negative seed", [req("generate", text="x", seed=-1)], E.BAD_VALUE),
    ("return_state as string", [req("embed", text="x", return_state="yes")], E.BAD_TYPE),
    ("state as float list", [req("generate", text="x", state=[0.0] * 8)], E.BAD_TYPE),
    ("negative cancel target", [req("cancel", target=-5)], E.BAD_VALUE),
    # unknown ops and fields
    ("empty op", [req("")], E.UNKNOWN_OP),
    ("op in capitals", [req("HELLO")], E.UNKNOWN_OP),
    ("field of another op", [req("info", text="x")], E.UNKNOWN_FIELD),
    ("sampling on embed", [req("embed", text="x", temperature=0.5)], E.UNKNOWN_FIELD),
    # negative or huge counts and lengths, capped before allocating
    ("array32 of 4G tokens", [raw_with("embed", "tokens", b"\xdd\xff\xff\xff\xff")], E.TOO_LARGE),
    # (a str or bin is referenced in place, never copied before it is all there: one longer
    # than the message is a truncated message)
    ("str32 of 4 GB", [raw_with("tokenize", "text", b"\xdb\xff\xff\xff\xff")], E.BAD_MESSAGE),
    ("bin32 of 4 GB", [raw_with("generate", "state", b"\xc6\xff\xff\xff\xff")], E.BAD_MESSAGE),
    ("map32 of 4G pairs", [raw_with("info", "x", b"\xdf\xff\xff\xff\xff")], E.TOO_LARGE),
    ("huge max_tokens", [req("generate", text="x", max_tokens=2 ** 64 - 1)], E.BAD_VALUE),
    ("huge top_k", [req("generate", text="x", top_k=2 ** 40)], E.BAD_VALUE),
    ("negative top_k", [req("generate", text="x", top_k=-1)], E.BAD_VALUE),
    ("4097 leases", [req("release", leases=list(range(1, 4098)))], E.TOO_LARGE),
    ("huge session id", [req("session_state", session=2 ** 64 - 1)], E.UNKNOWN_SESSION),
    ("session id zero", [req("session_state", session=0)], E.UNKNOWN_SESSION),
    # token ids
    ("token 2^40", [req("embed", tokens=[2 ** 40])], E.BAD_TOKEN),
    ("token INT32_MIN", [req("embed", tokens=[-(2 ** 31)])], E.BAD_TOKEN),
    ("detokenize >= vocab", [req("detokenize", tokens=[1024])], E.BAD_TOKEN),
    ("one bad among inputs", [req("embed", inputs=[[1, 2], [3, 1024]])], E.BAD_TOKEN),
    # sampling parameters
    ("inf temperature", [req("generate", text="x", temperature=math.inf)], E.BAD_VALUE),
    ("-inf temperature", [req("generate", text="x", temperature=-math.inf)], E.BAD_VALUE),
    ("negative temperature", [req("generate", text="x", temperature=-0.5)], E.BAD_VALUE),
    ("temperature 101", [req("generate", text="x", temperature=101.0)], E.BAD_VALUE),
    ("top_p 0", [req("generate", text="x", top_p=0.0)], E.BAD_VALUE),
    ("negative top_p", [req("generate", text="x", top_p=-0.1)], E.BAD_VALUE),
    ("NaN top_p", [req("generate", text="x", top_p=math.nan)], E.BAD_VALUE),
    ("presence_penalty 11", [req("generate", text="x", presence_penalty=11.0)], E.BAD_VALUE),
    ("-inf frequency_penalty", [req("generate", text="x", frequency_penalty=-math.inf)],
     E.BAD_VALUE),
    ("long stop string", [req("generate", text="x", stop=["s" * 257])], E.BAD_VALUE),
    # state blobs: length, dtype, model, content
    ("state as f16", [req("generate", text="x", state=state_bytes(STATE, dtype="<f2"))],
     E.BAD_STATE),
    ("state as f64", [req("generate", text="x", state=state_bytes(STATE, dtype="<f8"))],
     E.BAD_STATE),
    ("state of another model", [req("generate", text="x", state=state_bytes(OTHER_STATE))],
     E.BAD_STATE),
    ("state one float short", [req("embed", text="x", state=state_bytes(STATE - 1))],
     E.BAD_STATE),
    ("state with NaN", [req("generate", text="x", state=state_bytes(STATE, math.nan))],
     E.BAD_STATE),
    ("state with inf", [req("embed", text="x", state=state_bytes(STATE, math.inf))],
     E.BAD_STATE),
    ("open with a bad state", [req("session_open", state=state_bytes(7))], E.BAD_STATE),
    ("set_state without state", [req("session_set_state", session=5)], E.MISSING_FIELD),
    ("state with many inputs", [req("embed", inputs=["a", "b"], state=state_bytes(STATE))],
     E.BAD_VALUE),
]


def ask(sock, frames):
    sock.send_multipart(frames)
    assert sock.poll(10000), "no reply"
    return msgpack.unpackb(sock.recv(), raw=False, unicode_errors="replace")


def test_more_bad_requests_get_their_codes(worker, raw):
    names = [c[0] for c in CASES]
    assert len(names) == len(set(names))
    bg = Background(worker)
    try:
        for name, frames, code in CASES:
            reply = ask(raw, frames)
            assert reply["ok"] is False, f"{name}: accepted"
            assert reply["error"]["code"] == code, f"{name}: got {reply['error']}"
            assert ask(raw, [req("info")])["ok"], name  # still serving this client
    finally:
        bg.finish()


def test_released_foreign_and_closed_ids(worker):
    with worker.client() as a, worker.client() as b:
        a.hello()  # maps the ring: tensors come through it, with leases
        lease = a.call("embed", text="mine")["embeddings"]["shm"]["lease"]
        assert a.call("release", leases=[lease])["count"] == 1
        for who in (a, b):  # already released; and never b's
            with pytest.raises(rwkvd.WorkerError) as e:
                who.call("release", leases=[lease])
            assert e.value.code == E.UNKNOWN_LEASE
        s = a.session()
        s.close()
        for op in ("session_state", "session_close", "session_fork"):
            with pytest.raises(rwkvd.WorkerError) as e:
                a.call(op, session=s.id)
            assert e.value.code == E.UNKNOWN_SESSION, op


def test_client_dying_mid_stream_is_dropped_and_others_served(worker):
    bg = Background(worker)
    before = worker.stats()["clients"].get("gone", 0)
    child = python_child(worker.endpoint, """
        it = c.generate("stream until killed", max_tokens=16000, stream=True)
        next(it)
    """)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=10)
    wait_until(lambda: worker.stats()["clients"].get("gone", 0) > before, 15,
               "the worker to notice the dead client")
    wait_until(lambda: worker.stats()["active_sequences"] == 0, 15, "its generation to stop")
    bg.finish()


def test_session_close_racing_a_generate_on_it(worker):
    """The close is queued behind the running generate: the generate completes, then the
    session is gone. Pipelined on one socket, so the race is real."""
    with worker.client() as c:
        s = c.session()
        rid_gen = c._send("generate", {"session": s.id, "text": "race", "max_tokens": 64,
                                       "temperature": 0.0})
        rid_close = c._send("session_close", {"session": s.id})
        rid_after = c._send("session_state", {"session": s.id})
        got = {}
        while len(got) < 3:
            assert c._sock.poll(30000)
            r = msgpack.unpackb(c._sock.recv(), raw=False, unicode_errors="replace")
            if not r.get("heartbeat"):  # the worker's sign of life, not a reply
                got[r["id"]] = r
        assert got[rid_gen]["ok"] and got[rid_gen]["completion_tokens"] == 64
        assert got[rid_close]["ok"]
        assert got[rid_after]["error"]["code"] == E.UNKNOWN_SESSION


def test_cancel_racing_completion_gives_exactly_one_final_reply(worker):
    with worker.client() as c:
        for n in (1, 2, 8, 32):
            rid = c._send("generate", {"text": "x", "max_tokens": n})
            cid = c._send("cancel", {"target": rid})
            finals = {}
            while len(finals) < 2:
                assert c._sock.poll(30000)
                r = msgpack.unpackb(c._sock.recv(), raw=False, unicode_errors="replace")
                if r.get("heartbeat"):
                    continue
                assert r["id"] not in finals, "two final replies"
                finals[r["id"]] = r
            g = finals[rid]  # cancelled while running, before it started, or finished first
            assert (g["ok"] and g["finish_reason"] in ("cancelled", "length")) or (
                g["error"]["code"] == E.CANCELLED), g
            cancel = finals[cid]
            assert cancel["ok"] or cancel["error"]["code"] == E.UNKNOWN_REQUEST


def test_release_racing_retain_and_reuse(worker):
    with worker.client() as c:
        c.hello()
        lease = c.call("embed", text="shared")["embeddings"]["shm"]["lease"]
        ids = [c._send("retain", {"leases": [lease]}), c._send("release", {"leases": [lease]}),
               c._send("release", {"leases": [lease]}), c._send("release", {"leases": [lease]})]
        out = {}
        while len(out) < 4:
            assert c._sock.poll(10000)
            r = msgpack.unpackb(c._sock.recv(), raw=False, unicode_errors="replace")
            if not r.get("heartbeat"):
                out[r["id"]] = r
        assert [out[i]["ok"] for i in ids] == [True, True, True, False]
        assert out[ids[3]]["error"]["code"] == E.UNKNOWN_LEASE  # refs 2, released twice: gone
