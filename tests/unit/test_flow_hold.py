"""flow.Hold: the buffer-budget bytes one request holds, given back exactly once."""

from __future__ import annotations

from toolslim.proxy.budget import BufferBudget
from toolslim.proxy.flow import Hold


def test_what_a_request_holds_is_given_back_once_however_often_it_is_released() -> None:
    budget = BufferBudget(100)
    hold = Hold(budget)
    assert hold.take(60) and hold.take(30)
    hold.give(50)  # a piece sent on early
    hold.release()
    hold.release()
    assert (budget.held, hold.held) == (0, 0)


def test_a_take_that_does_not_fit_takes_nothing() -> None:
    budget = BufferBudget(100)
    first, second = Hold(budget), Hold(budget)
    assert first.take(80)
    assert second.room() == 20
    assert not second.take(21)
    assert (budget.held, second.held) == (80, 0)


def test_giving_back_more_than_is_held_gives_back_only_what_is_held() -> None:
    budget = BufferBudget(100)
    other, hold = Hold(budget), Hold(budget)
    assert other.take(50) and hold.take(10)
    hold.give(40)  # the piece was larger than what was held of it
    assert (budget.held, hold.held) == (50, 0)
