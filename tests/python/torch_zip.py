"""Writes checkpoints in torch.save's zip format without torch, for testing tools/pth_to_st.py.

torch.save pickles the state dict with protocol 2 through a Pickler whose persistent_id turns
every storage into ('storage', torch.<Type>Storage, key, 'cpu', numel) and every tensor into
torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks). Here the
same opcodes come from the standard Pickler: stand-in `torch` and `torch._utils` modules are put
in sys.modules while pickling, so GLOBAL opcodes name exactly what torch's do.
"""
from __future__ import annotations

import collections
import contextlib
import io
import pickle
import sys
import types
import zipfile

import numpy as np

# storage class name -> numpy dtype of its raw elements (BF16 as its uint16 bit patterns)
STORAGES = {"FloatStorage": np.dtype("<f4"), "HalfStorage": np.dtype("<f2"),
            "BFloat16Storage": np.dtype("<u2")}


@contextlib.contextmanager
def _stand_in_torch():
    torch = types.ModuleType("torch")
    utils = types.ModuleType("torch._utils")

    def _rebuild_tensor_v2(*args):  # never called: only its name is pickled
        raise AssertionError("stand-in")

    def _rebuild_parameter(*args):
        raise AssertionError("stand-in")

    for fn in (_rebuild_tensor_v2, _rebuild_parameter):
        fn.__module__, fn.__qualname__ = "torch._utils", fn.__name__
        setattr(utils, fn.__name__, fn)
    for name in STORAGES:
        setattr(torch, name, type(name, (), {"__module__": "torch"}))
    torch._utils = utils
    saved = {k: sys.modules.get(k) for k in ("torch", "torch._utils")}
    sys.modules.update({"torch": torch, "torch._utils": utils})
    try:
        yield torch, utils
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


class Storage:
    def __init__(self, kind: str, key: str, data: np.ndarray):
        self.kind, self.key = kind, key
        self.data = np.ascontiguousarray(data, dtype=STORAGES[kind]).reshape(-1)


class Tensor:
    """A view of a storage; pickles as torch's tensors do."""

    def __init__(self, storage: Storage, shape, offset=0, stride=None, parameter=False):
        self.storage, self.shape, self.offset = storage, tuple(shape), offset
        if stride is None:
            stride, step = [], 1
            for n in reversed(self.shape):
                stride.insert(0, step)
                step *= n
        self.stride, self.parameter = tuple(stride), parameter

    def __reduce__(self):
        utils = sys.modules["torch._utils"]
        rebuilt = (utils._rebuild_tensor_v2,
                   (self.storage, self.offset, self.shape, self.stride, False,
                    collections.OrderedDict()))
        if not self.parameter:
            return rebuilt
        return (utils._rebuild_parameter, (_Reduced(*rebuilt), True, collections.OrderedDict()))


class _Reduced:
    def __init__(self, fn, args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


def tensor(kind: str, array, key: str, parameter=False) -> Tensor:
    """A tensor owning its own storage, like every tensor in a BlinkDL checkpoint."""
    a = np.asarray(array)
    return Tensor(Storage(kind, key, a), a.shape, parameter=parameter)


def pickle_bytes(obj) -> bytes:
    with _stand_in_torch() as (torch, _):
        class Pickler(pickle.Pickler):
            def persistent_id(self, o):
                if isinstance(o, Storage):
                    return ("storage", getattr(torch, o.kind), o.key, "cpu", o.data.size)
                return None

        buf = io.BytesIO()
        Pickler(buf, protocol=2).dump(obj)
        return buf.getvalue()


def storages_of(obj) -> dict[str, Storage]:
    found = {}
    values = obj.values() if isinstance(obj, dict) else []
    for v in values:
        if isinstance(v, Tensor):
            found[v.storage.key] = v.storage
        elif isinstance(v, dict):
            found.update(storages_of(v))
    return found


def write_pth(path, obj, archive="archive", pkl: bytes | None = None) -> None:
    """torch.save's layout: data.pkl, byteorder, data/<key> per storage, version."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr(f"{archive}/data.pkl", pkl if pkl is not None else pickle_bytes(obj))
        z.writestr(f"{archive}/byteorder", b"little")
        for key, s in storages_of(obj).items():
            z.writestr(f"{archive}/data/{key}", s.data.tobytes())
        z.writestr(f"{archive}/version", b"3\n")


def read_st(path) -> tuple[dict, dict[str, tuple[str, list[int], bytes]]]:
    """A SafeTensors file's metadata and {name: (dtype, shape, bytes)}."""
    import json
    with open(path, "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    return meta, {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
                  for k, v in header.items()}
