"""limits: the numbers the connection limits hold clients to, read from Settings; the client
connections a descriptor limit allows; the budget of request body bytes held at once."""

from __future__ import annotations

import dataclasses
import resource

import pytest

from toolslim.config.settings import Settings, Timeouts
from toolslim.proxy.limits import (
    FILES_RESERVED,
    BufferBudget,
    ClientLimits,
    derived_max_connections,
)


def test_client_limits_are_the_settings_timeouts_and_counts() -> None:
    timeouts = dataclasses.replace(
        Timeouts(), client_headers=7.0, client_body_idle=8.0, client_keepalive=9.0
    )
    settings = dataclasses.replace(
        Settings(), timeouts=timeouts, max_connections=300, max_buffered_bytes=1 << 20
    )
    assert ClientLimits.of(settings) == ClientLimits(7.0, 8.0, 9.0, 300, 1 << 20)


def test_the_default_client_limits_are_the_settings_defaults() -> None:
    assert ClientLimits.of(Settings()) == ClientLimits()


@pytest.mark.parametrize(
    ("files", "connections"),
    [
        (1024, (1024 - FILES_RESERVED) // 2),  # a common soft limit
        (FILES_RESERVED + 2, 1),
        (FILES_RESERVED, 1),  # never below one connection
        (0, 1),
    ],
)
def test_each_client_connection_is_given_two_descriptors_after_the_reserve(
    files: int, connections: int
) -> None:
    assert derived_max_connections(files) == connections


def test_an_unlimited_descriptor_limit_still_gives_a_finite_number_of_connections() -> None:
    unlimited = derived_max_connections(resource.RLIM_INFINITY)
    assert unlimited == derived_max_connections(-1) > derived_max_connections(1 << 16)


def test_without_a_number_the_process_descriptor_limit_is_read() -> None:
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert derived_max_connections() == derived_max_connections(soft)


def test_the_buffer_budget_takes_what_fits_and_nothing_of_what_does_not() -> None:
    budget = BufferBudget(100)
    assert budget.take(60) and budget.held == 60
    assert not budget.take(41) and budget.held == 60  # refused whole, nothing taken
    assert budget.take(40) and budget.held == 100  # exactly full fits
    budget.give(60)
    assert budget.held == 40 and budget.take(60)
