#!/usr/bin/env python3
"""The rwkvd demo: starts a worker on a model and uses the Python client for generate, embed and
state (sessions), then prints the worker's stats. With no model it synthesises a random-weight
one (`rwkvd synth`). The worker runs on the Vulkan engine (`--device gpu`: any GPU, or lavapipe
on the CPU); `--device cpu` picks the CPU reference backend."""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "clients" / "python"))

import numpy as np  # noqa: E402

import rwkvd  # noqa: E402


def pick_model(binary: Path, model, tmp: Path):
    """(path, random_weights, how) for the model to serve."""
    if model is not None:
        return Path(model), Path(model).name.startswith("synthetic"), "given"
    # A small random-weight model with the real world vocabulary, so text tokenizes as usual.
    out = tmp / "random-weights.gguf"
    cmd = [str(binary), "synth", "--layers", "4", "--embd", "256", "--vocab", "65536",
           "--type", "q8_0", "--seed", "1", "--name", "rwkvd-demo-random-weights", "--quiet",
           "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0 or not out.exists():
        sys.exit(f"demo: `rwkvd synth` failed: {r.stderr.strip()[-400:]}")
    return out, True, "synthesised by `rwkvd synth` (L4 D256, world vocab, Q8_0)"


def start_worker(binary: Path, model: Path, tmp: Path, device: str):
    endpoint = f"ipc://{tmp}/rwkvd.sock"
    log = open(tmp / "serve.log", "w+")
    proc = subprocess.Popen([str(binary), "serve", "--model", str(model), "--endpoint", endpoint,
                             "--device", device],
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 120
    while True:
        if proc.poll() is not None:
            log.seek(0)
            sys.exit("demo: the worker exited:\n" + log.read())
        if (tmp / "rwkvd.sock").exists():
            try:
                with rwkvd.Client(endpoint, timeout=2) as c:
                    c.hello()
                return proc, endpoint, log
            except (rwkvd.RequestTimeout, rwkvd.NoWorker):
                pass
        if time.time() > deadline:
            proc.kill()
            sys.exit("demo: the worker did not come up")
        time.sleep(0.05)


def section(title: str) -> None:
    print(f"\n== {title}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--build", required=True)
    ap.add_argument("model", nargs="?")
    ap.add_argument("--device", choices=["gpu", "cpu"], default="gpu")
    args = ap.parse_args()
    binary = Path(args.build) / "tools" / "rwkvd"
    tmp = Path(tempfile.mkdtemp(prefix="rwkvd-demo-"))
    os.chmod(tmp, 0o700)
    model, random_weights, how = pick_model(binary, args.model, tmp)
    print(f"demo: model {model} ({how})")
    if random_weights:
        print("demo: RANDOM WEIGHTS: generated text is noise, but every path runs for real")
    proc, endpoint, log = start_worker(binary, model, tmp, args.device)
    try:
        with rwkvd.Client(endpoint) as c:
            c.hello()  # maps the shared-memory ring
            info = c.info()
            m = info["model"]
            section("worker")
            print(f"endpoint {endpoint}, device {info['device']}, "
                  f"{m['n_layer']} layers, n_embd {m['n_embd']}, vocab {m['n_vocab']}, "
                  f"shared memory {'mapped' if c.shm_mapped else 'not mapped'}")

            section("generate (streamed, seed 42)" + (" [random weights]" if random_weights else ""))
            prompt = "The quick brown fox"
            print(prompt, end="", flush=True)
            result = None
            for chunk in c.generate(prompt, max_tokens=40, temperature=0.8, top_p=0.9, seed=42,
                                    stream=True):
                print(chunk.text, end="", flush=True)
                result = chunk.result or result
            print(f"\n[{result.completion_tokens} tokens, finish: {result.finish_reason}]")

            section("embed")
            texts = ["a cat sat on the mat", "a cat sat on a mat", "stock markets fell today"]
            v = c.embed(texts)
            unit = v / np.linalg.norm(v, axis=1, keepdims=True)
            print(f"embeddings {v.shape} {v.dtype}, "
                  f"{'viewing shared memory' if not v.flags.owndata else 'inline'}")
            sims = unit @ unit.T
            for i, t in enumerate(texts):
                print(f"  {t!r:28} cos: " + " ".join(f"{s:+.3f}" for s in sims[i]))

            section("state (sessions)")
            with c.session() as s:
                pos = s.feed("Alice has a red ball. Bob has a blue kite.")
                st = s.state()
                print(f"after {pos} tokens: state {st.shape} {st.dtype}, |state| = "
                      f"{np.linalg.norm(st):.3f}, shares the ring: "
                      f"{np.shares_memory(st, np.frombuffer(c._ring.mm, np.uint8)) if c.shm_mapped else False}")
                fork = s.fork()
                # Another client (another agent process) forks it by its share token instead of
                # receiving the state and sending it back.
                with rwkvd.Client(endpoint) as other:
                    theirs = other.fork_shared(s.share())
                    a = s.generate(" Alice", max_tokens=8, temperature=0)
                    b = fork.generate(" Alice", max_tokens=8, temperature=0)
                    d = theirs.generate(" Alice", max_tokens=8, temperature=0)
                    theirs.close()
                print(f"session and its fork continue identically: {a.tokens == b.tokens}")
                print(f"another client's fork by share token too: {d.tokens == a.tokens}")
                again = c.generate(" Alice", max_tokens=8, temperature=0, state=st.copy())
                print(f"a stateless request with that state in agrees: {again.tokens == a.tokens}")
                fork.close()
                # Sessions belong to the client that opened them: the inline client gets its own,
                # from the same state.
                with rwkvd.Client(endpoint, use_shm=False) as inline, \
                        inline.session(state=st.copy()) as s_inline:
                    n = 50
                    t0 = time.perf_counter()
                    for _ in range(n):
                        s.state()
                    t_shm = (time.perf_counter() - t0) / n
                    t0 = time.perf_counter()
                    for _ in range(n):
                        s_inline.state()
                    t_inline = (time.perf_counter() - t0) / n
                print(f"state -> numpy: shared memory {t_shm * 1e6:.0f} us, inline {t_inline * 1e6:.0f} us")

            section("stats")
            stt = c.stats()
            print(f"requests {stt['requests']}")
            print(f"embed dispatches {stt['embed']['dispatches']}, generation steps "
                  f"{stt['generate']['steps']} (mean batch {stt['generate']['batch_sequences']['mean']:.2f}), "
                  f"prefix cache hit rate {stt['prefix_cache']['hit_rate']:.2f}")
            lat = stt["latency_ms"]
            for op in ("generate", "embed", "session_state"):
                if op in lat:
                    print(f"  {op:14} p50 {lat[op]['p50']:.2f} ms, p99 {lat[op]['p99']:.2f} ms")
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
        section("shutdown")
        print(f"worker exited with {rc}; socket removed: {not (tmp / 'rwkvd.sock').exists()}")
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
