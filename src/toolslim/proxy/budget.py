"""The buffer budget: request body bytes held in memory at once, over every connection of one
process (`BufferBudget`) or of every worker of a host (`HostBudget`, a locked shared file).

The request path calls `take` and `give` and reads `capacity` and `held`; it never knows which
of the two it holds. A body that does not fit streams through untouched instead (skipped
`busy`): it is never refused for it.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import struct
from pathlib import Path
from typing import Final, Protocol

FILE: Final = "buffered-bytes"  # in the workers' shared directory


class Budget(Protocol):
    """What the request path holds bodies to: `BufferBudget` or `HostBudget`."""

    capacity: int  # bytes

    @property
    def held(self) -> int:
        """Bytes held now, over every connection the budget covers."""
        ...

    @property
    def own(self) -> int:
        """Of them, what this process holds."""
        ...

    def take(self, size: int) -> bool:
        """Reserve `size` bytes, or take nothing and return False when they do not fit."""
        ...

    def give(self, size: int) -> None:
        """Return bytes taken earlier."""
        ...


class BufferBudget:
    """The bytes held by this process's requests, within `capacity`."""

    __slots__ = ("capacity", "held")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.held = 0

    @property
    def own(self) -> int:
        """What this process holds (all of `held`)."""
        return self.held

    def take(self, size: int) -> bool:
        """Reserve `size` bytes, or take nothing and return False when they do not fit."""
        if self.held + size > self.capacity:
            return False
        self.held += size
        return True

    def give(self, size: int) -> None:
        """Return bytes taken earlier."""
        self.held -= size


# The shared file: the host's total, then one (pid, leased) slot per worker process. A worker
# takes a free slot when it starts; the master frees a slot when its worker exits (its bytes
# go back with it, even after a SIGKILL).
_TOTAL: Final = struct.Struct("=q")
_SLOT: Final = struct.Struct("=qq")
SLOTS: Final = 256  # worker processes alive at once, counting those being replaced
LEASES: Final = 256  # a worker's lease is this part of the capacity


def _size() -> int:
    return _TOTAL.size + SLOTS * _SLOT.size


class HostBudget:
    """The bytes held by every worker of a host, within one `capacity`: a file in the workers'
    shared directory, mapped into each, changed under an fcntl lock (released by the kernel
    if its holder dies, so no worker can wedge the others).

    A worker reserves from the host in leases of `capacity / LEASES` (1 MiB of the default
    256 MiB) and takes from its lease without the lock, so most requests never lock; it keeps
    at most two leases unused. Other workers may so find up to two leases per worker
    unavailable: the host never holds more than `capacity`, and refuses a little early at
    worst. (bench/drift_bench.py --workers 2 measures a request's takes and give.)
    """

    def __init__(self, path: Path, capacity: int, pid: int | None = None) -> None:
        self.capacity = capacity
        self.lease = capacity // LEASES  # 0: every take and give goes to the host
        self._fd = os.open(path, os.O_RDWR)
        self._map = mmap.mmap(self._fd, _size())
        self.pid = os.getpid() if pid is None else pid
        self.own = 0  # what this worker's requests hold
        self._leased = 0  # what the host counts for this worker: `own` and its spare lease
        self._slot = self._claim()

    @staticmethod
    def create(path: Path) -> None:
        """Make the shared file, every slot free (the master, before it starts workers)."""
        with path.open("wb") as file:
            file.write(bytes(_size()))

    @property
    def held(self) -> int:
        """What every worker of the host holds now (with their unused leases)."""
        (total,) = _TOTAL.unpack_from(self._map, 0)
        return int(total)

    def take(self, size: int) -> bool:
        """Reserve `size` bytes of the host's budget, or take nothing and return False."""
        own = self.own + size
        if own > self._leased:
            wanted = own - self._leased
            # A whole lease when the host has room for it, else exactly what is missing.
            if not self._lease(max(wanted, self.lease)) and not self._lease(wanted):
                return False
        self.own = own
        return True

    def give(self, size: int) -> None:
        """Return bytes taken earlier."""
        self.own -= size
        spare = self._leased - self.own
        if spare > 2 * self.lease:
            self._lease(self.lease - spare)  # one lease kept spare, the rest back

    def _lease(self, size: int) -> bool:
        """Add `size` (negative: give back) to what the host counts for this worker, if the
        host's total stays within `capacity`."""
        memory = self._map
        fcntl.lockf(self._fd, fcntl.LOCK_EX)
        try:
            (total,) = _TOTAL.unpack_from(memory, 0)
            if size > 0 and total + size > self.capacity:
                return False
            _TOTAL.pack_into(memory, 0, total + size)
            self._leased += size
            _SLOT.pack_into(memory, self._slot, self.pid, self._leased)
            return True
        finally:
            fcntl.lockf(self._fd, fcntl.LOCK_UN)

    def _claim(self) -> int:
        """The offset of a free slot, now this worker's. With none free (workers replaced
        faster than the master freed them), one whose process is gone is freed and taken."""
        memory = self._map
        fcntl.lockf(self._fd, fcntl.LOCK_EX)
        try:
            offsets = range(_TOTAL.size, _size(), _SLOT.size)
            for offset in offsets:
                pid, _ = _SLOT.unpack_from(memory, offset)
                if pid in (0, self.pid):  # this pid's: a worker before it that was not freed
                    _free(memory, offset)
                    break
            else:
                offset = next(at for at in offsets if not _alive(_SLOT.unpack_from(memory, at)[0]))
                _free(memory, offset)
            _SLOT.pack_into(memory, offset, self.pid, 0)
            return offset
        finally:
            fcntl.lockf(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """Give back what this worker still holds, free its slot and unmap the file."""
        fcntl.lockf(self._fd, fcntl.LOCK_EX)
        try:
            _free(self._map, self._slot)
        finally:
            fcntl.lockf(self._fd, fcntl.LOCK_UN)
        self.own = self._leased = 0
        self._map.close()
        os.close(self._fd)


def release(path: Path, pid: int) -> None:
    """The master, once worker `pid` exited: its bytes back to the host, its slot free."""
    fd = os.open(path, os.O_RDWR)
    try:
        with mmap.mmap(fd, _size()) as memory:
            fcntl.lockf(fd, fcntl.LOCK_EX)
            try:
                for offset in range(_TOTAL.size, _size(), _SLOT.size):
                    if _SLOT.unpack_from(memory, offset)[0] == pid:
                        _free(memory, offset)
            finally:
                fcntl.lockf(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _free(memory: mmap.mmap, offset: int) -> None:
    """Under the lock: the slot's bytes out of the total, the slot free."""
    _, held = _SLOT.unpack_from(memory, offset)
    (total,) = _TOTAL.unpack_from(memory, 0)
    _TOTAL.pack_into(memory, 0, total - held)
    _SLOT.pack_into(memory, offset, 0, 0)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
