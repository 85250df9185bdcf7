#!/usr/bin/python3
"""Time from a session_state request to the numpy array, shared memory vs inline.

Starts `rwkvd serve` on a model (any RWKV-7 GGUF; the state is n_layer x (head_size + 2) x
n_embd floats, 5.4M for L=32, D=2560), feeds a short prompt into one session, then asks for its
state `--repeats` times over each path and prints the median and the spread. It also checks
that the shared-memory array is a view of the mapped ring (no copy on the Python side).

  bench/state_latency.py --rwkvd build/tools/rwkvd --model m.gguf [--device cpu] [--repeats 10]
"""
from __future__ import annotations

import argparse
import gc
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients" / "python"))
import rwkvd  # noqa: E402
from rwkvd.client import Session  # noqa: E402


def start(args: argparse.Namespace, endpoint: str, log) -> subprocess.Popen:
    proc = subprocess.Popen(
        [args.rwkvd, "serve", "--model", args.model, "--endpoint", endpoint, "--device",
         args.device, "--shm-mb", str(args.shm_mb), "--log-level", "warn"],
        stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + args.start_timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"rwkvd serve exited with {proc.returncode}")
        try:
            with rwkvd.Client(endpoint, timeout=2) as c:
                c.hello()
            return proc
        except (rwkvd.RequestTimeout, rwkvd.NoWorker):
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("rwkvd serve did not come up")


def time_states(session: Session, n: int, touch: bool) -> list:
    """Seconds per request -> array (and, with touch, a full read of it)."""
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        st = session.state()
        if touch:
            float(st.sum(dtype=np.float64))
        out.append(time.perf_counter() - t0)
        del st  # frees the ring lease; the next request carries its release
        gc.collect()
    return out


def summary(xs: list) -> str:
    ms = sorted(x * 1e3 for x in xs)
    return f"median {statistics.median(ms):7.2f} ms  (min {ms[0]:.2f}, max {ms[-1]:.2f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rwkvd", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--shm-mb", type=int, default=256)
    ap.add_argument("--start-timeout", type=float, default=300)
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="rwkvd-state-latency-"))
    endpoint = f"ipc://{tmp}/w.sock"
    with open(tmp / "serve.log", "w+") as log:
        proc = start(args, endpoint, log)
        try:
            with rwkvd.Client(endpoint, timeout=120) as shm, \
                    rwkvd.Client(endpoint, timeout=120, use_shm=False) as inline:
                shm.hello()
                inline.hello()
                if not shm.shm_mapped:
                    raise RuntimeError("the shared-memory ring could not be mapped")
                with shm.session() as s:
                    s.feed(list(b"A short prompt."))  # ids below 256: any vocab has them
                    st = s.state()
                    ring = np.frombuffer(shm._ring.mm, dtype=np.uint8)
                    view = np.shares_memory(st, ring) and not st.flags.owndata
                    print(f"state {st.shape} = {st.size / 1e6:.2f}M floats "
                          f"({st.nbytes / 2**20:.1f} MiB); shm array is a view of the ring: {view}")
                    # Sessions belong to the client that opened them: the inline client opens
                    # its own from the same state.
                    with inline.session(state=np.array(st)) as s_inline:
                        np.testing.assert_array_equal(s_inline.state(), st)
                        del st, ring
                        for _ in range(2):  # warm both paths (page faults, allocator)
                            time_states(s, 1, True)
                            time_states(s_inline, 1, True)
                        for touch in (False, True):
                            what = "request -> array" + (" + full read" if touch else "")
                            print(f"{what}, {args.repeats} requests each:")
                            print(f"  shm    {summary(time_states(s, args.repeats, touch))}")
                            print(f"  inline {summary(time_states(s_inline, args.repeats, touch))}")
                    fallbacks = shm.stats()["shm"]["events"].get("inline_fallbacks", 0)
                    print(f"shm inline fallbacks: {fallbacks}")
                    return 0 if view and fallbacks == 0 else 1
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            for p in tmp.iterdir():
                p.unlink()
            os.rmdir(tmp)


if __name__ == "__main__":
    sys.exit(main())
