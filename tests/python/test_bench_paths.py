"""`rwkvd bench` and `rwkvd synth` find their inputs at run time: the binary holds no path outside
the checkout (the fixtures come from --text / --vocab-file or $RWKVD_FIXTURES), and the GPU bench
scripts parse."""
import os
import subprocess
import sys

import pytest

from conftest import REPO, build_dir, require


def test_the_binary_holds_no_fixtures_path():
    data = require(build_dir() / "tools" / "rwkvd", "rwkvd binary").read_bytes()
    for needle in (b"../shared", b"/shared/fixtures"):
        assert needle not in data, needle


def test_bench_without_text_or_fixtures_says_what_to_give(tmp_path):
    binary = require(build_dir() / "tools" / "rwkvd", "rwkvd binary")
    env = {k: v for k, v in os.environ.items() if k != "RWKVD_FIXTURES"}
    r = subprocess.run([str(binary), "bench", "--model", str(tmp_path / "absent.gguf"),
                        "--out", str(tmp_path / "b.json")],
                       capture_output=True, text=True, timeout=30, env=env)
    assert r.returncode != 0
    assert "give --text FILE" in r.stderr and "RWKVD_FIXTURES" in r.stderr, r.stderr
    assert not (tmp_path / "b.json").exists()


@pytest.mark.parametrize("script", ["scripts/bench-gpu", "scripts/bench-bundle",
                                    "scripts/bundle/env.sh", "scripts/bundle/ab.sh",
                                    "scripts/bundle/profile.sh", "scripts/bundle/tests.sh",
                                    "scripts/bundle/kernel-sweep.sh",
                                    "scripts/bundle/collect-libs"])
def test_bench_scripts_parse(script):
    r = subprocess.run(["bash", "-n", str(REPO / script)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_the_llama_driver_runs_from_the_repo():
    # bench-gpu and bench-bundle take it from bench/llama/: it must import from there alone.
    r = subprocess.run([sys.executable, str(REPO / "bench" / "llama" / "llama_bench_rwkv7.py"),
                        "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "--lib-dir" in r.stdout and "--require-dev" in r.stdout
