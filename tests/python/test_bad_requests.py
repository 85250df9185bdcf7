"""Malformed requests each get an error reply with a code, while a second client keeps being
served. Raw frames go through a plain DEALER socket."""
from __future__ import annotations

import math
import threading
import time

import msgpack

from rwkvd import ErrorCode as E


def req(op, **fields):
    msg = {"v": 1, "id": 99, "op": op}
    msg.update(fields)
    return msgpack.packb(msg, use_bin_type=True)


def deep(n):
    v = 1
    for _ in range(n):
        v = [v]
    return v


# (name, frames, expected code). The worker runs with --max-tokens 4096 --max-batch 16
# --max-message-bytes 1 MiB (conftest).
CASES = [
    ("not msgpack", [b"\xc1\xc1\xc1"], E.BAD_MESSAGE),
    ("truncated msgpack", [req("info")[:-3]], E.BAD_MESSAGE),
    ("trailing bytes", [req("info") + b"\x01"], E.BAD_MESSAGE),
    ("not a map", [msgpack.packb([1, 2, 3])], E.BAD_MESSAGE),
    ("two frames", [req("info"), req("info")], E.BAD_MESSAGE),
    ("no version", [msgpack.packb({"id": 1, "op": "info"})], E.BAD_VERSION),
    ("future version", [msgpack.packb({"v": 2, "id": 1, "op": "info"})], E.BAD_VERSION),
    ("unknown op", [req("frobnicate")], E.UNKNOWN_OP),
    ("missing text", [req("tokenize")], E.MISSING_FIELD),
    ("wrong type", [req("tokenize", text=12)], E.BAD_TYPE),
    ("string id", [msgpack.packb({"v": 1, "id": "x", "op": "info"})], E.BAD_TYPE),
    ("unknown field", [req("generate", text="x", topp=0.5)], E.UNKNOWN_FIELD),
    ("token >= vocab", [req("embed", tokens=[1, 1024])], E.BAD_TOKEN),
    ("negative token", [req("embed", tokens=[-1])], E.BAD_TOKEN),
    ("float token", [req("embed", tokens=[1.5])], E.BAD_TYPE),
    ("too many tokens", [req("embed", tokens=[1] * 5000)], E.TOO_LARGE),
    ("batch too large", [req("embed", inputs=["a"] * 17)], E.TOO_LARGE),
    ("message too large", [req("embed", text="a" * (1 << 20) + "b")], E.TOO_LARGE),
    ("nesting too deep", [req("embed", inputs=deep(12))], E.TOO_LARGE),
    ("unknown session", [req("session_state", session=123456789)], E.UNKNOWN_SESSION),
    ("unknown lease", [req("release", leases=[987654321])], E.UNKNOWN_LEASE),
    ("NaN temperature", [req("generate", text="x", temperature=math.nan)], E.BAD_VALUE),
    ("top_p > 1", [req("generate", text="x", top_p=1.5)], E.BAD_VALUE),
    ("negative max_tokens", [req("generate", text="x", max_tokens=-3)], E.BAD_VALUE),
    ("top_k > vocab", [req("generate", text="x", top_k=5000)], E.BAD_VALUE),
    ("too many stops", [req("generate", text="x", stop=["a"] * 17)], E.TOO_LARGE),
    ("empty stop", [req("generate", text="x", stop=[""])], E.BAD_VALUE),
    ("state of wrong length", [req("generate", text="x", state=b"\0" * 12)], E.BAD_STATE),
    ("state not floats", [req("generate", text="x", state=b"\0" * 13)], E.BAD_STATE),
    ("state and session", [req("generate", text="x", session=5, state=b"\0" * 4)], E.BAD_VALUE),
    ("cancel nothing", [req("cancel", target=424242)], E.UNKNOWN_REQUEST),
    ("forward: unknown output", [req("forward", tokens=[1], output="both")], E.BAD_VALUE),
    ("output on embed", [req("embed", tokens=[1], output="all_logits")], E.UNKNOWN_FIELD),
    ("forward: many inputs", [req("forward", inputs=[[1], [2]])], E.UNKNOWN_FIELD),
    ("forward: output too large", [req("forward", tokens=[1] * 300, output="all_logits")],
     E.TOO_LARGE),
]


def test_bad_requests_get_errors_while_another_client_is_served(worker, raw):
    assert len(CASES) >= 15
    stop = threading.Event()
    served, failures = [], []

    def other_client():
        with worker.client(timeout=10) as c:
            while not stop.is_set():
                try:
                    v = c.embed("still here")
                    served.append(float(v[0]))
                except Exception as e:  # noqa: BLE001
                    failures.append(repr(e))

    t = threading.Thread(target=other_client)
    t.start()
    try:
        for name, frames, code in CASES:
            raw.send_multipart(frames)
            assert raw.poll(10000), f"{name}: no reply"
            reply = msgpack.unpackb(raw.recv(), raw=False)
            assert reply["ok"] is False, f"{name}: accepted"
            err = reply["error"]
            assert err["code"] == code, f"{name}: got {err}"
            assert err["name"] and err["message"], name
            # The worker still answers this client too.
            raw.send(req("info"))
            assert raw.poll(10000)
            assert msgpack.unpackb(raw.recv(), raw=False)["ok"], name
        # ... and the other client is still being served after all of them.
        seen = len(served)
        deadline = time.time() + 10
        while len(served) < seen + 3 and time.time() < deadline:
            time.sleep(0.01)
        assert len(served) >= seen + 3, "the second client stopped being served"
    finally:
        stop.set()
        t.join(timeout=30)
    assert not failures, failures[:3]
    with worker.client() as c:
        errors = c.stats()["errors"]
        assert sum(errors.values()) >= len(CASES)
