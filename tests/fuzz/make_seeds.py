#!/usr/bin/python3
"""Writes the seed corpora of the request, tokenizer and shm_reader fuzz targets.

Seeds are small valid (or nearly valid) inputs that get libFuzzer past the first checks; run this
again after a protocol change: python3 tests/fuzz/make_seeds.py
"""
import struct
from pathlib import Path

import msgpack

HERE = Path(__file__).resolve().parent / "corpus"


def put(target: str, name: str, data: bytes) -> None:
    d = HERE / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


def req(op: str, **fields) -> bytes:
    m = {"v": 1, "id": 7, "op": op}
    m.update(fields)
    return msgpack.packb(m, use_bin_type=True)


def requests() -> None:
    put("request", "generate", req("generate", text="Hello", max_tokens=8, temperature=0.7,
                                   top_p=0.9, top_k=40, presence_penalty=0.5,
                                   frequency_penalty=0.1, stop=["\n", "END"], seed=42,
                                   stream=True, release=[3, 4], shm=True))
    put("request", "generate_state", req("generate", tokens=[1, 2, 3], return_state=True,
                                         state=b"\0" * 64))
    put("request", "embed_inputs", req("embed", inputs=["a", [5, 6, 7], "b"]))
    put("request", "session_feed", req("session_feed", session=12345, tokens=[1, 2]))
    put("request", "session_set_state", req("session_set_state", session=9, state=b"\0" * 16))
    # A state as a shared-memory input: names no object, so decoding fails without a read.
    put("request", "session_open_shm_state", req("session_open", state={
        "shm": "/rwkvd-in-1-0123456789abcdef", "bytes": 16}))
    put("request", "session_fork_token", req("session_fork",
                                             token="0123456789abcdef0123456789abcdef"))
    put("request", "session_share", req("session_share", session=12345))
    put("request", "release", req("release", leases=[1, 2, 3]))
    put("request", "cancel", req("cancel", target=3))
    put("request", "hello", req("hello"))
    put("request", "reply_shm", msgpack.packb(
        {"v": 1, "id": 7, "ok": True, "embeddings": {"dtype": "f32", "shape": [1, 4], "shm": {
            "lease": 9, "slot": 0, "generation": 1, "offset": 4096, "bytes": 16}}}))
    put("request", "reply_error", msgpack.packb(
        {"v": 1, "id": 7, "ok": False, "error": {"code": 6, "name": "bad_value", "message": "x"}}))


def tokenizer() -> None:
    put("tokenizer", "ascii", b"Hello, world! The quick brown fox.\n")
    put("tokenizer", "utf8", "Grüße, 世界 🌍 — ok".encode())
    put("tokenizer", "bytes", bytes(range(256)))
    put("tokenizer", "ids", struct.pack("<8i", 0, 1, 33, 65529, 65530, -1, 10000, 256))


def ring(n_slots: int, data_bytes: int, slot: int, lease: int, gen: int, off: int,
         nbytes: int) -> bytes:
    data_offset = 64 + 32 * n_slots
    total = data_offset + data_bytes
    head = b"RWKVDSHM" + struct.pack("<IIQQQIII12x", 1, 64, total, data_offset, data_bytes,
                                      n_slots, 32, 1234)
    slots = bytearray(32 * n_slots)
    struct.pack_into("<QIIQQ", slots, 32 * slot, lease, gen, 1, off, nbytes)
    data = bytes((i * 7) & 255 for i in range(data_bytes))
    return head + bytes(slots) + data


def shm_reader() -> None:
    for name, (n, db, slot, off, nb, shape) in {
        "valid": (4, 256, 1, 192 + 64, 64, [4, 4]),
        "tail": (2, 128, 0, 128 + 96, 32, [8]),
    }.items():
        r = ring(n, db, slot, 0xABCDEF, 3, off, nb)
        desc = msgpack.packb({"dtype": "f32", "shape": shape, "shm": {
            "lease": 0xABCDEF, "slot": slot, "generation": 3, "offset": off, "bytes": nb}})
        put("shm_reader", name, struct.pack("<H", len(r)) + r + desc)
        # The same with "the worker agrees" (bit 15): the harness fills the slot entry in.
        put("shm_reader", name + "_agree", struct.pack("<H", len(r) | 0x8000) + r + desc)
    inline = msgpack.packb({"dtype": "f32", "shape": [2, 2], "data": b"\0" * 16},
                           use_bin_type=True)
    put("shm_reader", "inline", struct.pack("<H", 0) + inline)


if __name__ == "__main__":
    requests()
    tokenizer()
    shm_reader()
