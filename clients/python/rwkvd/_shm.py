"""Read-only view of the worker's shared-memory ring (PROTOCOL.md, "Shared-memory ring"), and
the objects through which large request tensors go the other way ("Shared-memory inputs")."""
from __future__ import annotations

import mmap
import os
import struct
import threading
from typing import Optional, Sequence, Union

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


class Ring:
    """A worker's ring segment mapped read-only: arrays viewing it cannot write to it."""

    def __init__(self, name: str) -> None:
        path = os.path.join("/dev/shm", name)
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            self.mm = mmap.mmap(fd, size, prot=mmap.PROT_READ)
        finally:
            os.close(fd)
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
        s_lease, s_gen, state, s_off, s_bytes = SLOT.unpack_from(
            self.mm, HEADER.size + slot * SLOT.size)
        if (state != 1 or s_lease != lease or s_gen != generation or s_off != offset
                or s_bytes != nbytes):
            raise WorkerError(ErrorCode.UNKNOWN_LEASE, "unknown_lease",
                              f"lease {lease} is no longer current")

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
