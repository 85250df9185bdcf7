"""`rwkvd convert model.pth out.gguf` end to end: a .pth built from rwkv.cpp's tiny model (as
BlinkDL's training code would have saved it) converts to exactly the fixture GGUFs."""
from __future__ import annotations

import collections
import os
import pathlib
import struct
import subprocess

import numpy as np
import pytest

import torch_zip as tz

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = pathlib.Path(os.environ.get("RWKVD_FIXTURES") or ROOT.parent / "shared" / "fixtures")
RWKVD = pathlib.Path(os.environ.get("RWKVD_BUILD_DIR") or ROOT / "build") / "tools" / "rwkvd"


def need(path: pathlib.Path) -> pathlib.Path:
    if not path.exists():
        if os.environ.get("RWKVD_REQUIRE_FIXTURES") == "1":
            pytest.fail(f"missing (RWKVD_REQUIRE_FIXTURES=1): {path}")
        pytest.skip(f"missing: {path}")
    return path


def read_rwkvcpp_bin(path):
    """{name: float32 array in PyTorch shape} from an rwkv.cpp FP32 file."""
    raw = path.read_bytes()
    pos, out = 24, collections.OrderedDict()
    while pos < len(raw):
        n_dims, key_len, dtype = struct.unpack_from("<3i", raw, pos)
        assert dtype == 0
        pos += 12
        shape = struct.unpack_from(f"<{n_dims}i", raw, pos)[::-1]
        pos += 4 * n_dims
        name = raw[pos:pos + key_len].decode()
        pos += key_len
        n = int(np.prod(shape))
        out[name] = np.frombuffer(raw, np.float32, n, pos).reshape(shape)
        pos += 4 * n
    return out


def blinkdl_state_dict(tensors, kind="FloatStorage"):
    """rwkv.cpp's fused lerps split and LoRAs transposed back: BlinkDL's names and shapes."""
    sd, key = collections.OrderedDict(), 0
    for name, a in tensors.items():
        parts = [(name, a)]
        leaf = name.rsplit(".", 1)[-1]
        if leaf == "x_rwkvag":
            prefix = name[: -len(leaf)]
            parts = [(prefix + x, a[i].reshape(1, 1, -1))
                     for i, x in enumerate(["x_r", "x_w", "x_k", "x_v", "x_a", "x_g"])]
        elif len(leaf) == 2 and leaf[0] in "wavg" and leaf[1] in "12":
            parts = [(name, a.T)]
        for n, arr in parts:
            if kind == "BFloat16Storage":
                arr = (np.ascontiguousarray(arr, np.float32).view(np.uint32) >> 16).astype(np.uint16)
            sd[n] = tz.tensor(kind, np.ascontiguousarray(arr), str(key))
            key += 1
    return sd


def convert(*args, env=None):
    return subprocess.run([str(need(RWKVD)), "convert", *map(str, args)], capture_output=True,
                          text=True, env=env)


@pytest.mark.parametrize("out_type,fixture", [("f32", "tiny-rwkv7-834K.f32.gguf"),
                                               ("f16", "tiny-rwkv7-834K.f16.gguf")])
def test_pth_converts_to_the_fixture(tmp_path, out_type, fixture):
    tensors = read_rwkvcpp_bin(need(FIXTURES / "rwkv7/rwkv-cpp/tiny-rwkv-7v0-834K-FP32.bin"))
    pth = tmp_path / "tiny-rwkv-7v0-834K.pth"
    tz.write_pth(pth, blinkdl_state_dict(tensors))
    out = tmp_path / "out.gguf"
    r = convert(pth, out, "--type", out_type)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == need(FIXTURES / "rwkv7" / fixture).read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.gguf", pth.name]  # temp .st gone


def test_bf16_pth_defaults_to_f16(tmp_path):
    tensors = read_rwkvcpp_bin(need(FIXTURES / "rwkv7/rwkv-cpp/tiny-rwkv-7v0-834K-FP32.bin"))
    pth = tmp_path / "model.pth"
    tz.write_pth(pth, blinkdl_state_dict(tensors, "BFloat16Storage"))
    r = convert(pth, tmp_path / "out.gguf")
    assert r.returncode == 0, r.stderr
    assert "(safetensors)" in r.stdout and "F16, 342 tensors" in r.stdout
    info = subprocess.run([str(RWKVD), "inspect", str(tmp_path / "out.gguf")],
                          capture_output=True, text=True, check=True).stdout
    assert '"model"' in info  # general.name from the .pth's file name, not the temp file's


def test_bad_pth_fails_cleanly(tmp_path):
    pth = tmp_path / "evil.pth"
    tz.write_pth(pth, {}, pkl=b"\x80\x02cos\nsystem\nX\x02\x00\x00\x00ls\x85R.")
    r = convert(pth, tmp_path / "out.gguf")
    assert r.returncode == 1
    assert "refusing to unpickle os.system" in r.stderr
    assert "pth_to_st.py failed" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evil.pth"]


def test_tools_dir_override(tmp_path):
    pth = tmp_path / "m.pth"
    tz.write_pth(pth, {"a": tz.tensor("FloatStorage", np.zeros(2, np.float32), "0")})
    env = dict(os.environ, RWKVD_TOOLS_DIR=str(tmp_path / "nowhere"))
    r = convert(pth, tmp_path / "out.gguf", env=env)
    assert r.returncode == 1
    assert f"{tmp_path / 'nowhere' / 'pth_to_st.py'} not found" in r.stderr
