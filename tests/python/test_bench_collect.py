"""scripts/bench-collect on a small made-up archive: rows and ratios against llama.cpp, and the
load rows compared at their last repeat (llama.cpp's figure is its second load in one process)."""
import io
import json
import subprocess
import sys
import tarfile

from conftest import REPO


def add(tar, name, text):
    data = text.encode()
    info = tarfile.TarInfo(f"results/{name}")
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def figure(samples, unit):
    s = sorted(samples)
    median = (s[(len(s) - 1) // 2] + s[len(s) // 2]) / 2
    return {"samples": samples, "median": median, "min": s[0], "max": s[-1], "unit": unit}


def test_rows_ratios_and_the_last_load_repeat(tmp_path):
    rwkvd = {"commit": "abc1234", "device": "vulkan:test", "date": "2026-11-26",
             "model_shape": {"n_layer": 12, "n_embd": 768}, "doc_tokens": 854,
             "figures": {"load.resident_ms": figure([600.0, 50.0], "ms"),
                         "load.device_ms": figure([150.0], "ms"),
                         "gen.b1.tok_s": figure([1000.0, 1200.0], "tok/s")}}
    llama = {"load": [{"total_ms": 300.0}, {"total_ms": 200.0}],
             "gen": {"tok_per_s_loop": 400.0}}
    archive = tmp_path / "results.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        add(tar, "gpu.csv", "name, driver_version\nTest GPU, 1.0\n")
        add(tar, "rwkvd-0.1b-q4_k_m.json", json.dumps(rwkvd))
        add(tar, "llama-0.1b-q4_k_m.json", json.dumps(llama))
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "bench-collect"), str(archive),
                        "--out-root", str(tmp_path), "--name", "out"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    table = (tmp_path / "out" / "README.md").read_text()
    # The last repeat (50 ms), not the median with the cold first (325), against llama's 2nd load.
    assert "| 50.0 (50.0–600) ms | 200 | 4.00× |" in table, table
    # A rate: the median over the repeats against llama.cpp's loop figure.
    assert "| 1,100 (1,000–1,200) tok/s | 400 | 2.75× |" in table, table
    assert "made once a process" in table and "| 150 (150–150) ms | — | — |" in table, table
    assert (tmp_path / "out" / "rwkvd-0.1b-q4_k_m.json").exists()
