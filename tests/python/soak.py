#!/usr/bin/python3
"""Soak: client processes send a mix of requests (generate, streamed generate, embed, state in
and out, sessions with feed/state/fork) to one worker for a bounded time, several in flight per
process over one socket. Every reply is checked: none lost, none duplicated, none for an id we
did not send, and every result equal to the same scenario run alone before the load (tokens
exactly, floats within FLOAT_TOL). The worker's VmRSS is sampled; after warm-up it must stay
flat within RSS_SLACK. Each checked client's latencies (request sent to final reply) are
reported, worst and p99.

With attackers, two more processes run beside the checked ones: a flood (one socket keeping
FLOOD_INFLIGHT long generations in flight, as many as the worker has slots) and a slow consumer
(one socket sending forwards with large inline replies and never reading them). The checked
clients must see the same results, their p99 latency near that of a soak without attackers, and
the worker's VmRSS at the end within RSS_GROWTH_MAX of its start.

    scripts/soak [--duration 600] [--clients 8] [--attackers]   # the long run
    tests/python/test_soak.py                                    # the CI run (~35 s)
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Generator, List, Optional

import msgpack
import numpy as np
import zmq

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "clients" / "python"))
from rwkvd import _shm  # noqa: E402

# Results must be identical to the request run alone: the CPU backend is batch-invariant (each
# row's arithmetic does not depend on what else is in the batch). A backend that is not can be
# soaked with RWKVD_SOAK_FLOAT_TOL set.
FLOAT_TOL = float(os.environ.get("RWKVD_SOAK_FLOAT_TOL", "0"))
# "Flat" VmRSS: after warm-up (WARMUP_FRAC of the run), the peak of the second half of the
# remaining samples may exceed the peak of the first half by at most RSS_SLACK_BYTES. A leak
# grows with the number of requests and shows up there; caches and allocator arenas that are
# still settling do so mostly in the first half and are not counted.
WARMUP_FRAC = 0.4
RSS_SLACK_BYTES = 4 << 20
RSS_GROWTH_MAX = 1.5  # with attackers: VmRSS at the end over VmRSS before the load
FLOOD_INFLIGHT = 16  # = the soak worker's --slots
FLOOD_MAX_TOKENS = 16384
SLOW_TOKENS = 256  # a slow consumer's forward: 256 rows of all_logits, 1 MiB inline
LANES = 3  # scenarios in flight per client process
REQUEST_TIMEOUT_S = 30.0

Scenario = Generator[Dict[str, Any], Dict[str, Any], List[Any]]


# ---- scenarios: generators that yield requests, receive replies, return what to compare ----

def _prompt(rng: random.Random, n_vocab: int) -> List[int]:
    return [rng.randrange(1, n_vocab) for _ in range(rng.randrange(4, 40))]


def _sampling(rng: random.Random) -> Dict[str, Any]:
    if rng.random() < 0.3:
        return {"temperature": 0.0, "max_tokens": rng.randrange(1, 16)}
    return {"temperature": 0.9, "top_p": 0.9, "top_k": rng.choice([0, 40]),
            "seed": rng.randrange(1 << 32), "max_tokens": rng.randrange(1, 16)}


def make_scenario(index: int, n_vocab: int) -> Callable[[], Scenario]:
    """Scenario `index`: the same requests every time it is built."""
    rng = random.Random(index)
    kind = index % 5
    prompt = _prompt(rng, n_vocab)
    samp = _sampling(rng)
    more = [_prompt(rng, n_vocab) for _ in range(rng.randrange(1, 4))]

    def generate() -> Scenario:
        r = yield dict(op="generate", tokens=prompt, **samp)
        return [r["tokens"], r["finish_reason"]]

    def stream() -> Scenario:
        r = yield dict(op="generate", tokens=prompt, stream=True, **samp)
        return [r["tokens"], r["finish_reason"]]  # the driver joins the chunks

    def embed() -> Scenario:
        r = yield dict(op="embed", inputs=[prompt] + more)
        return [r["embeddings"], r["n_tokens"]]

    def state() -> Scenario:
        a = yield dict(op="generate", tokens=prompt, return_state=True, **samp)
        b = yield dict(op="generate", tokens=more[0], state=a["state"].astype("<f4").tobytes(),
                       **samp)
        return [a["tokens"], a["state"], b["tokens"]]

    def session() -> Scenario:
        s = (yield dict(op="session_open"))["session"]
        f = yield dict(op="session_feed", session=s, tokens=prompt)
        st = yield dict(op="session_state", session=s)
        g = yield dict(op="generate", session=s, tokens=more[0], **samp)
        k = (yield dict(op="session_fork", session=s))["session"]
        e = yield dict(op="embed", session=k, tokens=more[-1])
        yield dict(op="session_close", session=k)
        yield dict(op="session_close", session=s)
        return [f["position"], st["state"], g["tokens"], g["position"], e["embeddings"]]

    return [generate, stream, embed, state, session][kind]


def same(a: Any, b: Any) -> Optional[str]:
    """None when a and b match (floats within FLOAT_TOL), else why not."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            return f"shape {a.shape} != {b.shape}"
        d = float(np.max(np.abs(a - b))) if a.size else 0.0
        return None if d <= FLOAT_TOL else f"max diff {d:g}"
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for x, y in zip(a, b):
            why = same(x, y)
            if why:
                return why
        return None
    return None if a == b else f"{a!r:.80} != {b!r:.80}"


# ---- one client process: lanes of scenarios multiplexed over one DEALER ----

@dataclass
class Counts:
    requests: int = 0
    replies: int = 0
    chunks: int = 0
    heartbeats: int = 0
    scenarios: int = 0
    errors: int = 0
    lost: int = 0
    duplicated: int = 0
    unknown: int = 0
    mismatched: int = 0
    by_op: Dict[str, int] = field(default_factory=dict)
    latencies_ms: List[float] = field(default_factory=list)  # final replies, one process's
    victims: List[tuple] = field(default_factory=list)  # per checked process: (p99, worst, n)
    notes: List[str] = field(default_factory=list)

    def note(self, msg: str) -> None:
        if len(self.notes) < 5:
            self.notes.append(msg)

    def add(self, other: "Counts") -> None:
        for k in ("requests", "replies", "chunks", "heartbeats", "scenarios", "errors", "lost",
                  "duplicated", "unknown", "mismatched"):
            setattr(self, k, getattr(self, k) + getattr(other, k))
        for op, n in other.by_op.items():
            self.by_op[op] = self.by_op.get(op, 0) + n
        self.victims += other.victims
        for n in other.notes:
            self.note(n)


class Driver:
    """Runs scenarios over one socket, several at once, matching replies by id."""

    def __init__(self, endpoint: str, use_shm: bool, counts: Counts) -> None:
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(endpoint)
        self.counts = counts
        self.next_id = 1
        self.release: List[int] = []
        self.ring: Optional[_shm.Ring] = None
        self.waiting: Dict[int, Any] = {}  # id -> lane
        self.sent_at: Dict[int, float] = {}  # id -> when it was sent
        self.finished: set = set()  # ids whose final reply came
        if use_shm:
            hello = self.roundtrip({"op": "hello"})
            self.ring = _shm.open_ring((hello.get("shm") or {}).get("name"))

    def close(self) -> None:
        self.sock.close()
        self.ctx.term()

    def send(self, req: Dict[str, Any], lane: Any) -> int:
        rid = self.next_id
        self.next_id += 1
        msg = {"v": 1, "id": rid, **req}
        if self.ring is not None:
            msg["shm"] = True
        if self.release:
            msg["release"], self.release = self.release, []
        self.sock.send(msgpack.packb(msg, use_bin_type=True))
        self.waiting[rid] = lane
        self.sent_at[rid] = time.monotonic()
        self.counts.requests += 1
        self.counts.by_op[req["op"]] = self.counts.by_op.get(req["op"], 0) + 1
        return rid

    def tensor(self, t: Dict[str, Any]) -> np.ndarray:
        shape = tuple(t["shape"])
        if "shm" in t:
            ref = t["shm"]
            self.ring.check(ref, shape)
            arr = np.frombuffer(self.ring.mm, dtype=np.float32, count=ref["bytes"] // 4,
                                offset=ref["offset"]).reshape(shape).copy()
            self.release.append(ref["lease"])
            return arr
        return np.frombuffer(t["data"], dtype="<f4").reshape(shape).copy()

    def receive(self, timeout_s: float) -> Optional[tuple]:
        """One message: (lane, reply) for a final reply, None on timeout or a chunk."""
        if not self.sock.poll(int(timeout_s * 1000)):
            return None
        r = msgpack.unpackb(self.sock.recv(), raw=False, unicode_errors="replace")
        if r.get("heartbeat") is True:  # a sign of life while requests run, not a reply
            self.counts.heartbeats += 1
            return None
        rid = r.get("id")
        if rid in self.finished:
            self.counts.duplicated += 1
            self.counts.note(f"second final reply for id {rid}")
            return None
        lane = self.waiting.get(rid)
        if lane is None:
            self.counts.unknown += 1
            self.counts.note(f"reply for an id never sent: {rid}")
            return None
        if r.get("more"):
            self.counts.chunks += 1
            lane.chunk_tokens += r.get("tokens", [])
            return None
        del self.waiting[rid]
        self.counts.latencies_ms.append((time.monotonic() - self.sent_at.pop(rid)) * 1000)
        self.finished.add(rid)
        self.counts.replies += 1
        for k in ("embeddings", "state"):
            if isinstance(r.get(k), dict):
                r[k] = self.tensor(r[k])
        if lane.chunk_tokens:
            r["tokens"] = lane.chunk_tokens + r.get("tokens", [])
            lane.chunk_tokens = []
        return lane, r

    def roundtrip(self, req: Dict[str, Any]) -> Dict[str, Any]:
        lane = Lane(None, -1)
        self.send(req, lane)
        deadline = time.monotonic() + REQUEST_TIMEOUT_S
        while time.monotonic() < deadline:
            got = self.receive(0.5)
            if got:
                return got[1]
        raise TimeoutError(f"no reply to {req['op']}")


class Lane:
    def __init__(self, scenario: Optional[Scenario], index: int) -> None:
        self.scenario = scenario
        self.index = index
        self.chunk_tokens: List[int] = []
        self.sent_at = 0.0


def run_lanes(endpoint: str, use_shm: bool, picks: Callable[[], Optional[int]], n_vocab: int,
              lanes: int, on_result: Callable[[int, List[Any]], None], counts: Counts) -> None:
    """Keeps `lanes` scenarios going until picks() returns None and all have finished."""
    d = Driver(endpoint, use_shm, counts)
    active: List[Lane] = []

    def start_lane() -> bool:
        idx = picks()
        if idx is None:
            return False
        lane = Lane(make_scenario(idx, n_vocab)(), idx)
        lane.sent_at = time.monotonic()
        d.send(next(lane.scenario), lane)
        active.append(lane)
        return True

    try:
        while len(active) < lanes and start_lane():
            pass
        while active:
            got = d.receive(1.0)
            now = time.monotonic()
            for lane in list(active):
                if lane not in d.waiting.values() or now - lane.sent_at < REQUEST_TIMEOUT_S:
                    continue
                counts.lost += 1
                counts.note(f"no reply within {REQUEST_TIMEOUT_S}s (scenario {lane.index})")
                active.remove(lane)
            if got is None:
                continue
            lane, r = got
            if lane not in active:
                continue
            if not r.get("ok"):
                counts.errors += 1
                counts.note(f"scenario {lane.index}: error {r.get('error')}")
                active.remove(lane)
                start_lane()
                continue
            try:
                req = lane.scenario.send(r)
                lane.sent_at = time.monotonic()
                d.send(req, lane)
            except StopIteration as stop:
                counts.scenarios += 1
                on_result(lane.index, stop.value)
                active.remove(lane)
                start_lane()
        if d.release:  # give the last leases back
            d.roundtrip({"op": "release", "leases": d.release})
    finally:
        d.close()


def client_process(endpoint: str, use_shm: bool, seed: int, deadline: float, n_scenarios: int,
                   n_vocab: int, expected: Dict[int, List[Any]], out: "mp.Queue") -> None:
    rng = random.Random(seed)
    counts = Counts()

    def picks() -> Optional[int]:
        return rng.randrange(n_scenarios) if time.time() < deadline else None

    def check(idx: int, result: List[Any]) -> None:
        why = same(result, expected[idx])
        if why:
            counts.mismatched += 1
            counts.note(f"scenario {idx}: {why}")

    try:
        run_lanes(endpoint, use_shm, picks, n_vocab, LANES, check, counts)
    except Exception as e:  # noqa: BLE001 - reported, counted as an error
        counts.errors += 1
        counts.note(f"client {seed} crashed: {e!r}")
    lat = sorted(counts.latencies_ms)
    if lat:
        counts.victims.append((lat[min(len(lat) - 1, int(0.99 * len(lat)))], lat[-1], len(lat)))
    counts.latencies_ms = []
    out.put(counts)


# ---- attackers: they are not checked, only run beside the checked clients ----

def _dealer(endpoint: str, **opts: int) -> tuple:
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    for k, v in opts.items():
        sock.setsockopt(getattr(zmq, k), v)
    sock.connect(endpoint)
    return ctx, sock


def flood_process(endpoint: str, deadline: float, n_vocab: int, out: "mp.Queue") -> None:
    """Keeps FLOOD_INFLIGHT long generations in flight (a new one for each that ends), then
    cancels what is left. Reports how many ended and how many were refused."""
    ctx, sock = _dealer(endpoint)
    rng = random.Random(7)
    next_id, live, ended, refused = 1, set(), 0, 0

    def start() -> None:
        nonlocal next_id
        sock.send(msgpack.packb({"v": 1, "id": next_id, "op": "generate",
                                 "tokens": _prompt(rng, n_vocab), "temperature": 0.0,
                                 "max_tokens": FLOOD_MAX_TOKENS}, use_bin_type=True))
        live.add(next_id)
        next_id += 1

    try:
        while len(live) < FLOOD_INFLIGHT:
            start()
        while time.time() < deadline:
            if not sock.poll(200):
                continue
            r = msgpack.unpackb(sock.recv(), raw=False, unicode_errors="replace")
            if r.get("heartbeat") or r.get("id") not in live:
                continue
            live.discard(r["id"])
            ended += 1 if r.get("ok") else 0
            refused += 0 if r.get("ok") else 1
            start()
        for rid in live:
            sock.send(msgpack.packb({"v": 1, "id": 10**9 + rid, "op": "cancel", "target": rid},
                                    use_bin_type=True))
    finally:
        sock.close()
        ctx.term()
    out.put(("flood", {"generations_ended": ended, "refused": refused}))


def slow_process(endpoint: str, deadline: float, n_vocab: int, out: "mp.Queue") -> None:
    """Sends a forward with a 1 MiB inline reply every 0.5 s and reads nothing until the end;
    then counts what it got: replies, and replies the worker dropped for the byte cap."""
    ctx, sock = _dealer(endpoint, RCVHWM=1, RCVBUF=4096)
    rng = random.Random(11)
    sent = 0
    try:
        while time.time() < deadline:
            sent += 1
            tokens = [rng.randrange(1, n_vocab) for _ in range(SLOW_TOKENS)]
            sock.send(msgpack.packb({"v": 1, "id": sent, "op": "forward", "tokens": tokens,
                                     "output": "all_logits"}, use_bin_type=True))
            time.sleep(0.5)
        got, dropped = 0, 0
        while sock.poll(2000):
            r = msgpack.unpackb(sock.recv(), raw=False, unicode_errors="replace")
            if r.get("heartbeat"):
                continue
            got += 1
            dropped += 0 if r.get("ok") else 1
    finally:
        sock.close()
        ctx.term()
    out.put(("slow", {"sent": sent, "answered_at_end": got, "dropped": dropped}))


# ---- the parent: baseline alone, then the load, then the report ----

def memory(pid: int) -> Dict[str, int]:
    """VmRSS and its parts (RssAnon: heap; RssShmem: ring pages touched; RssFile: the mapped
    model) from /proc/<pid>/status, in bytes."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key = line.split(":")[0]
            if key in ("VmRSS", "RssAnon", "RssFile", "RssShmem"):
                out[key] = int(line.split()[1]) * 1024
    return out


@dataclass
class SoakResult:
    counts: Counts
    samples: List[Dict[str, int]]  # memory() after warm-up, in time order
    duration_s: float
    rss_start: int = 0  # VmRSS before the load
    rss_end: int = 0  # VmRSS when the load ended
    attackers: Dict[str, Dict[str, int]] = field(default_factory=dict)

    def victims_p99_ms(self) -> float:
        return max((v[0] for v in self.counts.victims), default=0.0)

    def victims_worst_ms(self) -> float:
        return max((v[1] for v in self.counts.victims), default=0.0)

    def _halves(self, key: str = "VmRSS") -> tuple:
        v = [s[key] for s in self.samples]
        h = len(v) // 2
        return (max(v[:h]), max(v[h:])) if h else (0, 0)

    def rss_growth(self, key: str = "VmRSS") -> int:
        first, second = self._halves(key)
        return second - first

    def report(self) -> str:
        c = self.counts
        ops = ", ".join(f"{k} {v}" for k, v in sorted(c.by_op.items()))
        first, second = self._halves()
        parts = ", ".join(f"{k} {self.rss_growth(k) / 2**20:+.1f}"
                          for k in ("RssAnon", "RssShmem", "RssFile"))
        return (f"soak {self.duration_s:.0f}s: {c.scenarios} scenarios, {c.requests} requests, "
                f"{c.replies} replies, {c.chunks} stream chunks, {c.heartbeats} heartbeats; lost "
                f"{c.lost}, duplicated "
                f"{c.duplicated}, unknown {c.unknown}, mismatched {c.mismatched}, errors "
                f"{c.errors}\n  by op: {ops}\n  worker VmRSS peak after warm-up: first half "
                f"{first / 2**20:.1f} MiB, second half {second / 2**20:.1f} MiB (growth "
                f"{(second - first) / 2**20:+.1f} MiB: {parts}; slack {RSS_SLACK_BYTES >> 20} "
                f"MiB; {len(self.samples)} samples)\n"
                f"  worker VmRSS before the load {self.rss_start / 2**20:.1f} MiB, at its end "
                f"{self.rss_end / 2**20:.1f} MiB (x{self.rss_end / max(1, self.rss_start):.2f})\n"
                f"  checked clients' latency, p99 / worst ms: "
                + ", ".join(f"{p:.0f} / {w:.0f}" for p, w, _ in c.victims)
                + f" (all: p99 {self.victims_p99_ms():.0f}, worst {self.victims_worst_ms():.0f})"
                + "".join(f"\n  attacker {k}: {v}" for k, v in self.attackers.items())
                + "".join(f"\n  note: {n}" for n in c.notes))


def baseline(endpoint: str, n_scenarios: int, n_vocab: int) -> Dict[int, List[Any]]:
    """Each scenario alone: one lane, inline tensors, nothing else in flight."""
    expected: Dict[int, List[Any]] = {}
    order = iter(range(n_scenarios))
    counts = Counts()
    run_lanes(endpoint, False, lambda: next(order, None), n_vocab, 1,
              lambda i, r: expected.__setitem__(i, r), counts)
    if len(expected) != n_scenarios or counts.errors:
        raise RuntimeError(f"baseline failed: {counts.notes}")
    return expected


def soak(endpoint: str, worker_pid: int, duration_s: float, clients: int = 8,
         n_scenarios: int = 40, n_vocab: int = 1024, attackers: bool = False) -> SoakResult:
    expected = baseline(endpoint, n_scenarios, n_vocab)
    rss_start = memory(worker_pid)["VmRSS"]
    ctx = mp.get_context("spawn")
    out: "mp.Queue" = ctx.Queue()
    attacked: "mp.Queue" = ctx.Queue()
    t0 = time.time()
    deadline = t0 + duration_s
    procs = [ctx.Process(target=client_process,
                         args=(endpoint, i % 2 == 0, 1000 + i, deadline, n_scenarios, n_vocab,
                               expected, out), daemon=True)
             for i in range(clients)]
    bad = [ctx.Process(target=f, args=(endpoint, deadline, n_vocab, attacked), daemon=True)
           for f in ((flood_process, slow_process) if attackers else ())]
    for p in procs + bad:
        p.start()
    # Warm-up: a share of the run, and at least a few seconds after the (slow) process starts.
    warm_until = max(t0 + WARMUP_FRAC * duration_s, time.time() + 3.0)
    samples: List[Dict[str, int]] = []
    while time.time() < deadline and any(p.is_alive() for p in procs):
        if time.time() >= warm_until:
            samples.append(memory(worker_pid))
        time.sleep(0.25)
    rss_end = memory(worker_pid)["VmRSS"]
    total = Counts()
    for _ in procs:
        try:
            total.add(out.get(timeout=REQUEST_TIMEOUT_S + 30))
        except Exception:  # noqa: BLE001
            total.errors += 1
            total.note("a client process reported nothing")
    reports: Dict[str, Dict[str, int]] = {}
    for _ in bad:
        try:
            name, figures = attacked.get(timeout=30)
            reports[name] = figures
        except Exception:  # noqa: BLE001
            reports["?"] = {"reported nothing": 1}
    for p in procs + bad:
        p.join(timeout=10)
        if p.is_alive():
            p.kill()
    return SoakResult(total, samples, time.time() - t0, rss_start, rss_end, reports)


def main() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from conftest import Worker, fixtures_root  # the same worker the tests start

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=600.0, help="seconds of load")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--attackers", action="store_true",
                    help="a flood and a slow consumer beside the checked clients")
    ap.add_argument("--model", type=Path,
                    default=fixtures_root() / "rwkv7" / "synthetic-A.f32.gguf")
    args = ap.parse_args()
    w = Worker(args.model, SOAK_WORKER_ARGS)
    try:
        res = soak(w.endpoint, w.proc.pid, args.duration, args.clients,
                   attackers=args.attackers)
    finally:
        w.stop()
    print(res.report())
    return 0 if passed(res) else 1


# A small ring and prefix cache: both are filled during warm-up, so what is measured after it is
# the steady state, not first touches of their pages.
# A slow consumer holds up to --client-queue-bytes of replies in the worker (and one more): 8 MiB
# here, a sixth of the worker's VmRSS on the synthetic model.
SOAK_WORKER_ARGS = ["--shm-mb", "16", "--prefix-cache-mb", "8", "--slots", str(FLOOD_INFLIGHT),
                    "--client-queue-bytes", str(8 << 20)]


def passed(res: SoakResult) -> bool:
    c = res.counts
    return (c.scenarios > 0 and not (c.lost or c.duplicated or c.unknown or c.mismatched
                                     or c.errors) and res.rss_growth() <= RSS_SLACK_BYTES
            and (not res.attackers or res.rss_end <= RSS_GROWTH_MAX * res.rss_start))


if __name__ == "__main__":
    sys.exit(main())
