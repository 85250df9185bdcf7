"""`rwkvd serve` start-up and logs: the device it picks and says it picked, the ready line's
model shape, types, device and endpoint, `--log-level debug` request lines, `--drain-s`."""
from __future__ import annotations

import re
import signal
import subprocess
import threading
import time

import pytest

import rwkvd
from conftest import Worker, build_dir, fixtures_root, require


def ready_line(w: Worker) -> str:
    lines = [ln for ln in w.read_log().splitlines() if ln.startswith("rwkvd: ready on ")]
    assert len(lines) == 1, w.read_log()
    return lines[0]


def model_types(model) -> list:
    """The tensor types `rwkvd inspect` lists under "size per type"."""
    out = subprocess.run([str(build_dir() / "tools" / "rwkvd"), "inspect", str(model)],
                         capture_output=True, text=True, check=True).stdout
    section = out.split("size per type:\n", 1)[1]
    return re.findall(r"^  (\w+) +\d+ tensors", section, re.M)


@pytest.mark.parametrize("name", ["synthetic-A.f32.gguf", "synthetic-A.f16.gguf"])
def test_the_ready_line_names_shape_types_device_and_endpoint(name):
    model = require(fixtures_root() / "rwkv7" / name, "fixture")
    w = Worker(model, [])
    try:
        line = ready_line(w)
        with w.client() as c:
            info = c.info()
    finally:
        w.stop()
    m = info["model"]
    assert line.startswith(f"rwkvd: ready on {w.endpoint} in "), line
    for part in (m["name"], f"{m['n_layer']} layers", f"n_embd {m['n_embd']}",
                 f"head_size {m['head_size']}", f"n_vocab {m['n_vocab']}", f"on {info['device']}"):
        assert part in line, (part, line)
    weights = re.search(r"weights ([^,]+(?:, [a-z0-9_]+ \d+%)*)", line).group(1)
    types = model_types(model)
    assert types and sorted(re.findall(r"([a-z0-9_]+) \d+%", weights)) == sorted(types), line


def device_line(w: Worker) -> str:
    found = re.findall(r"^rwkvd: device (cpu|gpu) \((.*)\)$", w.read_log(), re.M)
    assert len(found) == 1, w.read_log()
    return found[0]


def test_serve_picks_a_device_by_itself_and_says_which(synthetic_model):
    w = Worker(synthetic_model, [])
    try:
        device, why = device_line(w)
        with w.client() as c:
            backend = c.info()["device"]
    finally:
        w.stop()
    assert why.startswith("auto: ")
    # The GPU where there is one (the Vulkan engine), else the CPU backend: as the worker runs.
    assert backend.startswith("vulkan:" if device == "gpu" else "cpu"), (device, backend)


def test_an_explicit_device_is_named_as_asked(synthetic_model):
    w = Worker(synthetic_model, ["--device", "cpu"])
    try:
        assert device_line(w) == ("cpu", "--device cpu")
    finally:
        w.stop()


def test_debug_logs_a_line_per_request_and_reply(synthetic_model):
    w = Worker(synthetic_model, ["--log-level", "debug"])
    try:
        with w.client() as c:
            c.generate("hello", max_tokens=3)
            c.embed(["a", "b"])
            with pytest.raises(rwkvd.WorkerError):
                c.generate([10 ** 6], max_tokens=1)
        time.sleep(0.2)
        log = w.read_log()
    finally:
        w.stop()
    got = re.findall(r"request (\d+) (\w+) from (\S+): (\d+) bytes", log)
    replies = re.findall(r"reply (\d+) (\w+) to (\S+): (\w+) in ([0-9.]+) ms", log)
    errors = re.findall(r"reply (\d+) to (\S+): (\w+) \(", log)
    mine = [(i, op, tag, n) for i, op, tag, n in got if op in ("generate", "embed")]
    assert [op for _, op, _, _ in mine] == ["generate", "embed", "generate"], log
    assert len({tag for _, _, tag, _ in mine}) == 1 and all(int(n) > 0 for *_, n in mine)
    by_id = {i: (op, tag, outcome) for i, op, tag, outcome, _ in replies}
    (gen, _, tag, _), (emb, *_), (bad, *_) = mine
    assert by_id[gen] == ("generate", tag, "ok") and by_id[emb] == ("embed", tag, "ok"), log
    assert (bad, tag, "bad_token") in errors, log


def start_stream(w: Worker, max_tokens: int):
    """A generation streaming on its own thread: (result holder, first-chunk event)."""
    out: dict = {}
    first = threading.Event()

    def run() -> None:
        try:
            with w.client(timeout=60) as c:
                n = 0
                for ch in c.generate("go", max_tokens=max_tokens, temperature=1, stream=True):
                    n += len(ch.tokens)
                    first.set()
                out["tokens"] = n
                out["result"] = ch.result
        except rwkvd.RwkvdError as e:
            out["error"] = e
        first.set()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    assert first.wait(30)
    return out, t


def test_drain_finishes_the_generation_in_flight_and_refuses_new_work(synthetic_model):
    w = Worker(synthetic_model, ["--drain-s", "30", "--log-level", "info"])
    out, t = start_stream(w, 1500)  # ~2 s on 2 cores
    w.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    with w.client(timeout=10) as c:
        with pytest.raises(rwkvd.WorkerError) as e:
            c.generate("new", max_tokens=2)
    assert e.value.name == "shutting_down"
    t.join(30)
    assert "error" not in out, out
    assert out["result"].finish_reason == "length" and out["tokens"] == 1500
    assert w.proc.wait(10) == 0
    assert "drained: every request finished" in w.read_log()


def test_drain_is_bounded_and_a_second_signal_stops_at_once(synthetic_model):
    w = Worker(synthetic_model, ["--drain-s", "1"])
    out, t = start_stream(w, 16000)  # ~18 s: longer than the drain
    started = time.time()
    w.proc.send_signal(signal.SIGTERM)
    assert w.proc.wait(10) == 0
    assert time.time() - started < 6
    t.join(10)
    assert "error" in out or out["result"].finish_reason == "cancelled", out

    w = Worker(synthetic_model, ["--drain-s", "60"])
    out, t = start_stream(w, 16000)
    w.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    started = time.time()
    w.proc.send_signal(signal.SIGTERM)
    assert w.proc.wait(10) == 0
    assert time.time() - started < 5
    t.join(10)
