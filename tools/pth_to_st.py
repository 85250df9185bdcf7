#!/usr/bin/python3
"""Convert a PyTorch checkpoint (.pth, torch.save's zip format) to SafeTensors, without torch.

`rwkvd convert model.pth out.gguf` runs this to a temporary .st and converts that; see
docs/CONVERT.md. Usage: pth_to_st.py IN.pth OUT.st

torch.save writes a zip holding `<archive>/data.pkl`, a pickle (protocol 2) of the state dict,
and one file `<archive>/data/<key>` per tensor storage. In the pickle every tensor is a call
`torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)` and every storage a
persistent id `('storage', torch.<Type>Storage, key, location, numel)`.

Unpickling runs whatever callables a pickle names, so a checkpoint from elsewhere could run
code. The Unpickler here resolves only the handful of names a tensor state dict uses and
refuses everything else; storages become lazy references and are read one at a time while
the output is written, so memory stays around the largest single storage.

Tensors keep their element type: F32, F16 and BF16 (numpy has no bfloat16, so BF16 data is
moved as uint16 and tagged "BF16"; rwkvd widens it to float32 exactly when it reads it).
"""
from __future__ import annotations

import collections
import json
import os
import pickle
import sys
import zipfile

import numpy as np

# torch storage class -> (SafeTensors dtype, numpy dtype of the raw little-endian elements)
STORAGE_TYPES = {
    "FloatStorage": ("F32", np.dtype("<f4")),
    "HalfStorage": ("F16", np.dtype("<f2")),
    "BFloat16Storage": ("BF16", np.dtype("<u2")),
}


class CheckpointError(Exception):
    """A checkpoint this script cannot or will not read; the message says why."""


class StorageType:
    def __init__(self, name: str):
        if name not in STORAGE_TYPES:
            raise CheckpointError(f"tensor storage torch.{name} is not supported "
                                  f"(only {', '.join(sorted(STORAGE_TYPES))})")
        self.name = name
        self.st_dtype, self.np_dtype = STORAGE_TYPES[name]


class Storage:
    """A storage not yet read: which zip member holds it, and its element type and count."""

    def __init__(self, stype: StorageType, key: str, numel: int):
        self.stype, self.key, self.numel = stype, key, numel


class TensorRef:
    """A strided view of a storage, as _rebuild_tensor_v2 describes it."""

    def __init__(self, storage: Storage, offset: int, size, stride):
        self.storage, self.offset = storage, int(offset)
        self.shape, self.stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.storage.stype.np_dtype.itemsize


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False,
                       backward_hooks=None, metadata=None):
    if not isinstance(storage, Storage):
        raise CheckpointError("malformed checkpoint: a tensor without a storage")
    return TensorRef(storage, storage_offset, size, stride)


def _rebuild_parameter(data, requires_grad=False, backward_hooks=None):
    return data  # an nn.Parameter is its tensor here


class RestrictedUnpickler(pickle.Unpickler):
    """Resolves only what a tensor state dict needs; any other global is refused."""

    ALLOWED = {
        ("collections", "OrderedDict"): collections.OrderedDict,
        ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
        ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    }

    def find_class(self, module, name):
        if (module, name) in self.ALLOWED:
            return self.ALLOWED[(module, name)]
        if module == "torch" and name.endswith("Storage"):
            return StorageType(name)
        raise CheckpointError(f"refusing to unpickle {module}.{name}: not part of a plain "
                              "tensor state dict")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], StorageType)):
            raise CheckpointError(f"malformed checkpoint: unexpected persistent id {pid!r}")
        _, stype, key, _location, numel = pid
        return Storage(stype, str(key), int(numel))


def _archive_prefix(zf: zipfile.ZipFile) -> str:
    pkls = [n for n in zf.namelist() if n == "data.pkl" or n.endswith("/data.pkl")]
    if len(pkls) != 1:
        raise CheckpointError("not a torch.save zip: expected one data.pkl, found "
                              f"{len(pkls)}")
    return pkls[0][: -len("data.pkl")]


def load_state_dict(zf: zipfile.ZipFile) -> tuple[str, dict[str, TensorRef]]:
    """The archive prefix and the checkpoint's tensors by name, in pickle order."""
    prefix = _archive_prefix(zf)
    if prefix + "byteorder" in zf.namelist() and zf.read(prefix + "byteorder").strip() != b"little":
        raise CheckpointError("big-endian checkpoints are not supported")
    with zf.open(prefix + "data.pkl") as f:
        try:
            obj = RestrictedUnpickler(f).load()
        except CheckpointError:
            raise
        except Exception as e:  # a damaged pickle: say so rather than show a traceback
            raise CheckpointError(f"cannot unpickle data.pkl: {e}") from e
    if isinstance(obj, dict) and "state_dict" in obj and isinstance(obj["state_dict"], dict):
        obj = obj["state_dict"]  # some training checkpoints nest the weights
    if not isinstance(obj, dict):
        raise CheckpointError(f"data.pkl holds a {type(obj).__name__}, not a state dict")
    tensors = {}
    for name, value in obj.items():
        if isinstance(value, TensorRef):
            tensors[str(name)] = value
        else:
            print(f"pth_to_st: skipping {name}: not a tensor", file=sys.stderr)
    if not tensors:
        raise CheckpointError("the checkpoint holds no tensors")
    return prefix, tensors


def tensor_bytes(ref: TensorRef, raw: bytes, name: str):
    """The tensor's elements in row-major order, from its storage's raw bytes."""
    dt = ref.storage.stype.np_dtype
    if len(raw) != ref.storage.numel * dt.itemsize:
        raise CheckpointError(f"{name}: storage {ref.storage.key} has {len(raw)} bytes, expected "
                              f"{ref.storage.numel} x {dt.itemsize}")
    if any(s < 0 for s in ref.shape) or any(s < 0 for s in ref.stride) or ref.offset < 0:
        raise CheckpointError(f"{name}: negative size, stride or offset")
    if ref.shape and 0 not in ref.shape:
        last = ref.offset + sum((n - 1) * s for n, s in zip(ref.shape, ref.stride))
        if last >= ref.storage.numel:
            raise CheckpointError(f"{name}: view reaches element {last} of a storage of "
                                  f"{ref.storage.numel}")
    elif not ref.shape and ref.offset >= ref.storage.numel:
        raise CheckpointError(f"{name}: offset {ref.offset} outside its storage")
    contiguous = [1] * len(ref.shape)
    for i in range(len(ref.shape) - 2, -1, -1):
        contiguous[i] = contiguous[i + 1] * ref.shape[i + 1]
    if all(n == 1 or s == c for n, s, c in zip(ref.shape, ref.stride, contiguous)):
        # Already row-major (every BlinkDL tensor is): the bytes are a slice, no copy.
        start = ref.offset * dt.itemsize
        return memoryview(raw)[start:start + ref.nbytes]
    flat = np.frombuffer(raw, dtype=dt)
    view = np.lib.stride_tricks.as_strided(
        flat[ref.offset:], shape=ref.shape, strides=[s * dt.itemsize for s in ref.stride],
        writeable=False)
    return np.ascontiguousarray(view).tobytes()


def convert(src: str, dst: str) -> int:
    """Writes `dst` from `src`; returns the number of tensors."""
    try:
        zf = zipfile.ZipFile(src)
    except zipfile.BadZipFile as e:
        raise CheckpointError("not a zip-format torch checkpoint (torch.save's legacy "
                              "format is not supported)") from e
    with zf:
        prefix, tensors = load_state_dict(zf)
        header, offset = {"__metadata__": {"format": "pt", "rwkvd.lora_layout": "pytorch"}}, 0
        for name, ref in tensors.items():
            header[name] = {"dtype": ref.storage.stype.st_dtype, "shape": list(ref.shape),
                            "data_offsets": [offset, offset + ref.nbytes]}
            offset += ref.nbytes
        text = json.dumps(header, separators=(",", ":")).encode("utf-8")
        text += b" " * (-len(text) % 8)  # keep the data section 8-byte aligned
        with open(dst, "wb") as out:
            out.write(len(text).to_bytes(8, "little"))
            out.write(text)
            cached_key, cached = None, b""
            for name, ref in tensors.items():
                if ref.storage.key != cached_key:  # tensors sharing a storage read it once
                    member = f"{prefix}data/{ref.storage.key}"
                    try:
                        cached = zf.read(member)
                    except KeyError as e:
                        raise CheckpointError(f"{name}: storage {member} missing from the "
                                              "zip") from e
                    cached_key = ref.storage.key
                out.write(tensor_bytes(ref, cached, name))
    return len(tensors)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: pth_to_st.py IN.pth OUT.st", file=sys.stderr)
        return 2
    try:
        n = convert(argv[1], argv[2])
    except (CheckpointError, OSError) as e:
        try:
            os.unlink(argv[2])
        except OSError:
            pass
        print(f"pth_to_st: {argv[1]}: {e}", file=sys.stderr)
        return 1
    print(f"pth_to_st: wrote {n} tensors to {argv[2]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
