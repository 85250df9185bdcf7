"""tools/pth_to_st.py on torch-format checkpoints built by hand (no torch needed)."""
from __future__ import annotations

import collections
import pathlib
import struct
import subprocess
import sys

import numpy as np
import pytest

import torch_zip as tz

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "pth_to_st.py"


def run(src, dst):
    return subprocess.run([sys.executable, str(SCRIPT), str(src), str(dst)],
                          capture_output=True, text=True)


def convert_ok(tmp_path, obj, **kw):
    src, dst = tmp_path / "m.pth", tmp_path / "m.st"
    tz.write_pth(src, obj, **kw)
    r = run(src, dst)
    assert r.returncode == 0, r.stderr
    return tz.read_st(dst)


def test_keeps_dtypes_shapes_and_bytes(tmp_path):
    f32 = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    f16 = np.array([1.5, -0.25, 65504, 6e-8], dtype=np.float16)
    wide = np.array([[1.0, -2.0], [3.140625, 2.0**100], [-0.0, 7.0]], dtype=np.float32)
    bf16 = (wide.view(np.uint32) >> 16).astype(np.uint16)  # exact in BF16
    meta, st = convert_ok(tmp_path, collections.OrderedDict([
        ("emb.weight", tz.tensor("FloatStorage", f32, "0")),
        ("blocks.0.att.x_r", tz.tensor("HalfStorage", f16, "1")),
        ("head.weight", tz.tensor("BFloat16Storage", bf16, "2")),
    ]))
    assert meta == {"format": "pt", "rwkvd.lora_layout": "pytorch"}
    assert list(st) == ["emb.weight", "blocks.0.att.x_r", "head.weight"]  # pickle order
    assert st["emb.weight"] == ("F32", [2, 3], f32.tobytes())
    assert st["blocks.0.att.x_r"] == ("F16", [4], f16.tobytes())
    dtype, shape, raw = st["head.weight"]
    assert (dtype, shape) == ("BF16", [3, 2])
    # BF16 is the top half of a float32: widening the uint16s gives the values back.
    widened = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_array_equal(widened.reshape(3, 2), wide)


def test_strided_and_shared_storages(tmp_path):
    base = tz.Storage("FloatStorage", "7", np.arange(24, dtype=np.float32))
    obj = {
        # a transposed (4, 6) view: column-major strides
        "t": tz.Tensor(base, (6, 4), offset=0, stride=(1, 6)),
        # a row-major slice at an offset of the same storage
        "s": tz.Tensor(base, (2, 3), offset=5, stride=(3, 1)),
        # a scalar and an empty tensor
        "scalar": tz.Tensor(base, (), offset=23, stride=()),
        "empty": tz.Tensor(base, (0, 3), offset=0, stride=(3, 1)),
    }
    _, st = convert_ok(tmp_path, obj)
    full = np.arange(24, dtype=np.float32)
    np.testing.assert_array_equal(np.frombuffer(st["t"][2], np.float32).reshape(6, 4),
                                  full.reshape(4, 6).T)
    np.testing.assert_array_equal(np.frombuffer(st["s"][2], np.float32), full[5:11])
    assert st["scalar"] == ("F32", [], full[23:].tobytes())
    assert st["empty"] == ("F32", [0, 3], b"")


def test_parameters_and_nested_state_dict(tmp_path):
    w = np.ones((2, 2), np.float32)
    _, st = convert_ok(tmp_path, {"state_dict": {"w": tz.tensor("FloatStorage", w, "0",
                                                                 parameter=True)},
                                  "epoch": 3})
    assert st == {"w": ("F32", [2, 2], w.tobytes())}


def test_reads_hand_assembled_opcodes(tmp_path):
    """The exact protocol-2 byte stream torch.save writes for {'x': tensor([1., 2.])}."""
    def unicode(s):
        b = s.encode()
        return b"X" + struct.pack("<I", len(b)) + b

    pkl = (b"\x80\x02" + b"ccollections\nOrderedDict\nq\x00)Rq\x01("
           + unicode("x") + b"ctorch._utils\n_rebuild_tensor_v2\nq\x02("
           + b"(" + unicode("storage") + b"ctorch\nFloatStorage\nq\x03" + unicode("0")
           + unicode("cpu") + b"K\x02tq\x04Q"  # persistent id tuple, BINPERSID
           + b"K\x00K\x02\x85K\x01\x85\x89h\x00)Rq\x05tq\x06Rq\x07u.")
    obj = {"x": tz.tensor("FloatStorage", np.array([1.0, 2.0], np.float32), "0")}
    _, st = convert_ok(tmp_path, obj, pkl=pkl)
    assert st == {"x": ("F32", [2], np.array([1.0, 2.0], np.float32).tobytes())}


def test_refuses_other_globals(tmp_path):
    """A pickle that would run os.system is refused before anything runs."""
    src, dst = tmp_path / "evil.pth", tmp_path / "evil.st"
    marker = tmp_path / "ran"
    pkl = (b"\x80\x02cos\nsystem\n" + b"X" + struct.pack("<I", len(f"touch {marker}"))
           + f"touch {marker}".encode() + b"\x85R.")
    tz.write_pth(src, {}, pkl=pkl)
    r = run(src, dst)
    assert r.returncode == 1
    assert "refusing to unpickle os.system" in r.stderr
    assert not marker.exists() and not dst.exists()


@pytest.mark.parametrize("case,message", [
    ("not_zip", "not a zip-format torch checkpoint"),
    ("no_pkl", "expected one data.pkl, found 0"),
    ("int8", "tensor storage torch.CharStorage is not supported"),
    ("missing_storage", "storage archive/data/0 missing from the zip"),
    ("out_of_range", "view reaches element 9 of a storage of 4"),
])
def test_errors(tmp_path, case, message):
    src, dst = tmp_path / f"{case}.pth", tmp_path / f"{case}.st"
    four = tz.Storage("FloatStorage", "0", np.zeros(4, np.float32))
    if case == "not_zip":
        src.write_bytes(b"\x80\x02}q\x00.")
    elif case == "no_pkl":
        import zipfile
        with zipfile.ZipFile(src, "w") as z:
            z.writestr("archive/version", b"3\n")
    elif case == "int8":
        pkl = tz.pickle_bytes({"a": tz.tensor("FloatStorage", np.zeros(2, np.float32), "0")})
        tz.write_pth(src, {}, pkl=pkl.replace(b"FloatStorage", b"CharStorage"))
    elif case == "missing_storage":
        tz.write_pth(src, {}, pkl=tz.pickle_bytes({"a": tz.Tensor(four, (4,))}))
    elif case == "out_of_range":
        tz.write_pth(src, {"a": tz.Tensor(four, (2, 2), offset=1, stride=(4, 4))})
    r = run(src, dst)
    assert r.returncode == 1, r.stderr
    assert message in r.stderr
    assert not dst.exists()
