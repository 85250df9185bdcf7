"""`rwkvd inspect --plan`: the Vulkan forward's plan of a model file on a named device profile or
the device at hand, printed without running it; `rwkvd synth --zeros` makes the real-shaped,
zero-weight file it is shown on (holes in the file: no disk, no time)."""
from __future__ import annotations

import subprocess

import pytest

from conftest import build_dir

RWKVD = build_dir() / "tools" / "rwkvd"


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([str(RWKVD), *args], capture_output=True, text=True, check=check,
                          timeout=120)


@pytest.fixture(scope="module")
def model_2_9b(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("plan") / "2.9b-zeros.gguf"
    run("synth", "--preset", "2.9b", "--type", "q4_k_m", "--seed", "1", "--zeros", "--quiet",
        "--out", str(path))
    # Every byte of its 2 GB of weights is a hole: the file takes almost no disk.
    assert path.stat().st_size > 1_900_000_000
    assert path.stat().st_blocks * 512 < 16_000_000
    return str(path)


def test_a_decode_step_on_the_h200_profile_lists_every_dispatch(model_2_9b):
    out = run("inspect", "--plan", model_2_9b, "--device-profile", "h200").stdout
    assert "on NVIDIA H200 (tuning nvidia-hopper), 1 tokens, 1 sequences" in out
    assert "lora_in_wkv" in out  # a kernel choice: wkv does the LoRA up products
    layer1 = out.split("layer 1\n", 1)[1].split("layers 2-31: as layer 1\n", 1)[0]
    products = [ln for ln in layer1.splitlines() if ln.startswith("  mm ")]
    # r/k/v on int8 inputs, the LoRA down products on floats, the output, ffn key writing the
    # int8 form of its output for ffn value.
    assert "mm ffn key q4_k: mvq_q4_k" in layer1 and "in=int8 +int8" in layer1, layer1
    assert len(products) == 5, layer1
    assert out.rstrip().endswith("== host")


def test_a_long_chunk_on_the_h200_profile_takes_tensor_cores(model_2_9b):
    out = run("inspect", "--plan", model_2_9b, "--device-profile", "h200", "--tokens", "512").stdout
    layer1 = out.split("layer 1\n", 1)[1]
    assert "mm ffn key q4_k: mc_q4_k" in layer1 and "in=fp16" in layer1, layer1
    assert "mm lora up f32: mc_f32" in layer1, layer1  # a long chunk runs them as products


def test_the_same_file_on_the_lavapipe_profile_takes_no_tensor_cores(model_2_9b):
    out = run("inspect", "--plan", model_2_9b, "--device-profile", "lavapipe", "--tokens", "512")
    assert "(tuning cpu)" in out.stdout
    assert "mc_" not in out.stdout and "mcd_" not in out.stdout


def test_bad_shapes_and_profiles_say_what_is_wrong(model_2_9b):
    r = run("inspect", "--plan", model_2_9b, "--device-profile", "h300", check=False)
    assert r.returncode != 0 and "h300" in r.stderr and "h200" in r.stderr, r.stderr
    r = run("inspect", "--plan", model_2_9b, "--tokens", "2", "--sequences", "3",
            "--device-profile", "h200", check=False)
    assert r.returncode != 0 and "--sequences" in r.stderr, r.stderr
