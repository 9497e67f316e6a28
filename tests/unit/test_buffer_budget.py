"""budget: request body bytes held at once. One process's budget, and the host's that every
worker takes from: what one worker holds, another cannot take, and the bytes of a worker that
exited, however it exited, go back to the host."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolslim.proxy import budget
from toolslim.proxy.budget import Budget, BufferBudget, HostBudget


def host(folder: Path, capacity: int, *pids: int) -> list[HostBudget]:
    """One budget per worker (by pid) on one shared file."""
    path = folder / budget.FILE
    HostBudget.create(path)
    return [HostBudget(path, capacity, pid) for pid in pids]


@pytest.fixture(params=["process", "host"])
def one(request: pytest.FixtureRequest, tmp_path: Path) -> Budget:
    if request.param == "process":
        return BufferBudget(100)
    (only,) = host(tmp_path, 100, 1)
    return only


def test_a_take_that_does_not_fit_takes_nothing(one: Budget) -> None:
    assert one.take(60)
    assert not one.take(41)
    assert one.held == one.own == 60
    assert one.take(40)
    one.give(100)
    assert one.held == 0 and one.take(100)


def test_what_one_worker_holds_another_cannot_take(tmp_path: Path) -> None:
    first, second = host(tmp_path, 100, 1, 2)
    assert first.take(60)
    assert not second.take(50)
    assert second.take(40)
    assert first.held == second.held == 100
    assert (first.own, second.own) == (60, 40)
    first.give(60)
    assert second.take(60) and second.own == 100


def test_the_master_gives_back_the_bytes_of_a_worker_that_exited(tmp_path: Path) -> None:
    killed, survivor = host(tmp_path, 100, 1, 2)
    assert killed.take(70)
    budget.release(tmp_path / budget.FILE, 1)  # as the master does when worker 1 exits
    assert survivor.held == 0
    assert survivor.take(100)


def test_a_worker_that_stops_gives_back_what_it_still_holds(tmp_path: Path) -> None:
    stopping, other = host(tmp_path, 100, 1, 2)
    assert stopping.take(30)
    stopping.close()
    assert other.held == 0


def test_a_new_worker_with_the_pid_of_one_never_released_does_not_inherit_its_bytes(
    tmp_path: Path,
) -> None:
    (old,) = host(tmp_path, 100, 7)
    assert old.take(50)
    reborn = HostBudget(tmp_path / budget.FILE, 100, 7)
    assert reborn.held == 0 and reborn.own == 0


def test_a_worker_takes_from_its_lease_and_keeps_at_most_two_leases_unused(
    tmp_path: Path,
) -> None:
    capacity = budget.LEASES * 1000  # leases of 1,000 bytes
    first, second = host(tmp_path, capacity, 1, 2)
    assert first.take(10) and first.held == 1000  # a whole lease reserved for 10 bytes
    assert second.take(capacity - 1000)  # the rest of the host
    assert first.take(990)  # within its lease
    assert not first.take(1)  # beyond it, and the host is full
    second.give(capacity - 1000)
    assert first.held == 1000 + 1000  # second keeps one lease spare of what it gave
    assert first.take(capacity - 2000) and first.own == capacity - 1000
    assert not second.take(1001)  # its spare lease holds 1,000
    first.give(capacity - 1000)
    assert first.held <= 2 * 1000 + 1000
