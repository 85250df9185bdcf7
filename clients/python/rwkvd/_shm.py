"""Read-only view of the worker's shared-memory ring (PROTOCOL.md, "Shared-memory ring"), and
the objects through which large request tensors go the other way ("Shared-memory inputs")."""
from __future__ import annotations

import ctypes
import mmap
import os
import struct
import threading
import weakref
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from .errors import ProtocolViolation, WorkerError, ErrorCode

MAGIC = b"RWKVDSHM"
VERSION = 1
HEADER = struct.Struct("<8sIIQQQIII12x")  # 64 bytes
SLOT = struct.Struct("<QIIQQ")  # 32 bytes: lease, generation, state, offset, bytes
_MADV_POPULATE_READ = getattr(mmap, "MADV_POPULATE_READ", 22)  # Linux 5.14
_POPULATE_CHUNK = 8 << 20


def _populate(mm: mmap.mmap) -> None:
    """Maps the ring's pages into this process a few MiB at a time (PROTOCOL.md, "Shared-memory
    ring"), so that a tensor landing where this client has not read before costs no page faults.
    Best effort: on an old kernel, or once the ring is closed, pages map on first read instead."""
    try:
        size = len(mm)
        for at in range(0, size, _POPULATE_CHUNK):
            mm.madvise(_MADV_POPULATE_READ, at, min(_POPULATE_CHUNK, size - at))
    except (OSError, ValueError):
        pass


_PAGE = mmap.PAGESIZE
_MAP_PRIVATE, _MAP_ANONYMOUS, _MREMAP_MAYMOVE, _MREMAP_FIXED = 0x02, 0x20, 1, 2
_libc: Optional[ctypes.CDLL] = None


def _c() -> ctypes.CDLL:
    """libc's mmap, mprotect and mremap (Linux, where /dev/shm is)."""
    global _libc
    if _libc is None:
        lib = ctypes.CDLL(None, use_errno=True)
        lib.mmap.restype = ctypes.c_void_p
        lib.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                             ctypes.c_int, ctypes.c_long]
        lib.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        lib.mremap.restype = ctypes.c_void_p
        lib.mremap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int,
                               ctypes.c_void_p]
        lib.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        _libc = lib
    return _libc


def _make_private(addr: int, size: int) -> bool:
    """Replaces the pages [addr, addr + size) of a mapping with a private, read-only copy of
    them, in one step (mremap over them): a thread reading them meanwhile sees the same bytes
    before and after. False where the system refuses."""
    lib = _c()
    tmp = lib.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, _MAP_PRIVATE | _MAP_ANONYMOUS,
                   -1, 0)
    if tmp in (None, ctypes.c_void_p(-1).value):
        return False
    ctypes.memmove(tmp, addr, size)
    if (lib.mprotect(tmp, size, mmap.PROT_READ) == 0
            and lib.mremap(tmp, size, size, _MREMAP_MAYMOVE | _MREMAP_FIXED, addr) == addr):
        return True
    lib.munmap(tmp, size)
    return False


class Ring:
    """A worker's ring segment mapped read-only: arrays viewing it cannot write to it.

    Each array made by view() holds its lease until it is garbage-collected (the lease id then
    goes to the client's pending releases) or until detach() gives the client's leases back."""

    def __init__(self, name: str) -> None:
        path = os.path.join("/dev/shm", name)
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            size = os.fstat(fd).st_size
            self.mm = mmap.mmap(fd, size, prot=mmap.PROT_READ)
        except BaseException:
            os.close(fd)
            raise
        # Kept open to see the object's size (check()); closed when this Ring goes.
        self._fd = fd
        weakref.finalize(self, os.close, fd)
        (magic, version, header_bytes, total, data_offset, data_bytes, n_slots, slot_bytes,
         pid) = HEADER.unpack_from(self.mm, 0)
        if (magic != MAGIC or version != VERSION or header_bytes != HEADER.size
                or slot_bytes != SLOT.size or total > size or n_slots == 0
                or HEADER.size + n_slots * SLOT.size > data_offset
                or data_offset + data_bytes > total):
            raise ProtocolViolation(f"{path} is not an rwkvd v{VERSION} ring")
        self.name = name
        self.n_slots = n_slots
        self.data_offset = data_offset
        self.data_bytes = data_bytes
        self.pid = pid
        # Leases of the arrays alive now: lease -> (offset, bytes). Finalizers edit it at any
        # moment (single dict operations, atomic under the GIL).
        self._live: Dict[int, Tuple[int, int]] = {}
        self.populating: Optional[threading.Thread] = None
        if os.environ.get("RWKVD_SHM_POPULATE", "1") != "0" and hasattr(self.mm, "madvise"):
            self.populating = threading.Thread(target=_populate, args=(self.mm,), daemon=True,
                                               name="rwkvd-ring-populate")
            self.populating.start()

    def check(self, ref: dict, shape: Sequence[int]) -> None:
        """Raise unless `ref` lies in the data area, matches `shape` (float32) and the slot table
        still holds this lease at this generation. A reply is untrusted input: every field is
        checked before numpy is pointed at the mapping."""
        try:
            slot, lease, generation = int(ref["slot"]), int(ref["lease"]), int(ref["generation"])
            offset, nbytes = int(ref["offset"]), int(ref["bytes"])
            count = 1
            for d in shape:
                if int(d) < 0:
                    raise ValueError("negative dimension")
                count *= int(d)
        except (KeyError, TypeError, ValueError) as e:
            raise ProtocolViolation(f"malformed shm reference: {e}") from None
        if not 0 <= slot < self.n_slots:
            raise ProtocolViolation(f"slot {slot} outside the ring")
        if (offset < self.data_offset or nbytes < 0 or offset % 4 != 0 or nbytes != 4 * count
                or offset + nbytes > self.data_offset + self.data_bytes):
            raise ProtocolViolation("shm reference outside the data area or of the wrong size")
        if os.fstat(self._fd).st_size < len(self.mm):
            # Truncated by another process: reading it would be a SIGBUS. The worker replaces
            # it; this client says hello again and maps the new one.
            raise WorkerError(ErrorCode.UNKNOWN_LEASE, "unknown_lease",
                              f"/dev/shm/{self.name} was truncated")
        s_lease, s_gen, state, s_off, s_bytes = SLOT.unpack_from(
            self.mm, HEADER.size + slot * SLOT.size)
        if (state != 1 or s_lease != lease or s_gen != generation or s_off != offset
                or s_bytes != nbytes):
            raise WorkerError(ErrorCode.UNKNOWN_LEASE, "unknown_lease",
                              f"lease {lease} is no longer current")

    def view(self, ref: dict, release: Callable[[int], None]) -> np.ndarray:
        """The flat float32 array of a checked reference (check()). Its lease lives as long as
        the array: every reshape, slice or view keeps it as its base; when the last goes, the
        lease id is passed to `release` (which must only queue it: it runs inside the GC)."""
        lease, offset, nbytes = int(ref["lease"]), int(ref["offset"]), int(ref["bytes"])
        flat = np.frombuffer(self.mm, dtype=np.float32, count=nbytes // 4, offset=offset)
        self._live[lease] = (offset, nbytes)
        weakref.finalize(flat, self._collected, lease, release)
        return flat

    def _collected(self, lease: int, release: Callable[[int], None]) -> None:
        if self._live.pop(lease, None) is not None:
            release(lease)

    def detach(self) -> List[int]:
        """For a client that goes while arrays it got still live: their bytes become private
        copies at the same addresses (the arrays stay as they are, now owning what they show),
        so that the worker may have the leases back at once. Returns those lease ids; a lease
        whose pages cannot be made private stays out (the worker then frees it once it finds
        the client gone)."""
        live = dict(self._live)
        base = np.frombuffer(self.mm, dtype=np.uint8).__array_interface__["data"][0]
        spans: List[List[int]] = []  # page-aligned, merged
        for offset, nbytes in sorted(live.values()):
            start = offset // _PAGE * _PAGE
            end = min(len(self.mm), -(-(offset + nbytes) // _PAGE) * _PAGE)
            if spans and start <= spans[-1][1]:
                spans[-1][1] = max(spans[-1][1], end)
            else:
                spans.append([start, end])
        done = [(a, b) for a, b in spans if _make_private(base + a, b - a)]
        freed = []
        for lease, (offset, nbytes) in live.items():
            if any(a <= offset and offset + nbytes <= b for a, b in done):
                self._live.pop(lease, None)
                freed.append(lease)
        return freed

    def worker_alive(self) -> bool:
        """False once the worker that made this ring has exited (we face a restarted one)."""
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return self.pid > 0


def open_ring(name: Optional[str]) -> Optional[Ring]:
    """The ring, or None when it cannot be mapped (another host or user: tensors come inline)."""
    if not name:
        return None
    try:
        return Ring(name)
    except (OSError, ProtocolViolation):
        return None


INPUT_PREFIX = "rwkvd-in-"


def write_input(data: Union[bytes, memoryview]) -> Optional[str]:
    """A new shared-memory input object (mode 0600) holding `data`; its name for the request
    ("/rwkvd-in-<pid>-<32 hex digits>"), or None where it cannot be made (the caller sends
    inline). The worker removes it once read; remove_input() covers a request never read."""
    name = f"{INPUT_PREFIX}{os.getpid()}-{os.urandom(16).hex()}"
    path = os.path.join("/dev/shm", name)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except OSError:
        os.close(fd)
        remove_input("/" + name)
        return None
    os.close(fd)
    return "/" + name


def remove_input(name: str) -> None:
    try:
        os.unlink(os.path.join("/dev/shm", name.lstrip("/")))
    except FileNotFoundError:
        pass
