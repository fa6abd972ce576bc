"""The hotel app's tools and verifiers, in-process, and the shipped task set."""

from __future__ import annotations

import json

import pytest

from grpo.config import DEFAULT_TASKS
from toolenvs.local import hotel, hotel_tasks

ALICE = {"CURRENT_DATE": "2026-03-01", "LOGGED_IN_USER": "alice", "LOGGED_IN_NAME": "Alice Martin"}
SEED = {"bookings": [
    {"booking_id": "B10", "hotel_id": "H01", "guest": "alice", "check_in": "2026-03-05", "nights": 2},
    {"booking_id": "B11", "hotel_id": "H02", "guest": "bob", "check_in": "2026-03-06", "nights": 1},
]}


def test_search_is_cheapest_first_and_unknown_city_is_an_error():
    state = hotel.initial_state(ALICE)
    assert [h["hotel_id"] for h in hotel.search_hotels(state, "rome")] == ["H03", "H04"]
    with pytest.raises(hotel.AppError, match="no hotels in Atlantis"):
        hotel.search_hotels(state, "Atlantis")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"hotel_id": "H99", "check_in": "2026-03-02", "nights": 1}, "not found"),
        ({"hotel_id": "H01", "check_in": "2026-02-28", "nights": 1}, "in the past"),
        ({"hotel_id": "H01", "check_in": "March 2", "nights": 1}, "YYYY-MM-DD"),
        ({"hotel_id": "H01", "check_in": "2026-03-02", "nights": 30}, "nights must be"),
    ],
)
def test_booking_errors(args, message):
    with pytest.raises(hotel.AppError, match=message):
        hotel.book_hotel(hotel.initial_state(ALICE), **args)


def test_cancel_respects_ownership():
    state = hotel.initial_state(ALICE, SEED)
    assert [b["booking_id"] for b in hotel.list_bookings(state)] == ["B10"]
    with pytest.raises(hotel.AppError, match="permission denied"):
        hotel.cancel_booking(state, "B11")
    assert hotel.cancel_booking(state, "B10")["status"] == "cancelled"
    with pytest.raises(hotel.AppError, match="not found"):
        hotel.cancel_booking(state, "B10")


def test_verifier_accepts_exactly_the_asked_booking():
    spec = {"type": "booking_made", "hotel_id": "H01", "check_in": "2026-03-02", "nights": 2}
    right = [("book_hotel", {"hotel_id": "H01", "check_in": "2026-03-02", "nights": 2})]
    wrong_nights = [("book_hotel", {"hotel_id": "H01", "check_in": "2026-03-02", "nights": 3})]
    twice = right + right
    for calls, expected in [(right, 1.0), (wrong_nights, 0.0), (twice, 0.0), ([], 0.0)]:
        start, final, _ = hotel.replay(ALICE, {}, calls)
        assert hotel.verify(final, start, spec) == expected


def test_cancel_verifier_rejects_collateral_changes():
    spec = {"type": "booking_cancelled", "booking_id": "B10"}
    seed = {"bookings": [*SEED["bookings"], {"booking_id": "B12", "hotel_id": "H05", "guest": "alice", "check_in": "2026-04-01", "nights": 1}]}
    start, final, _ = hotel.replay(ALICE, seed, [("cancel_booking", {"booking_id": "B10"})])
    assert hotel.verify(final, start, spec) == 1.0
    start, final, _ = hotel.replay(ALICE, seed, [("cancel_booking", {"booking_id": "B10"}), ("cancel_booking", {"booking_id": "B12"})])
    assert hotel.verify(final, start, spec) == 0.0


def test_unknown_verifier_lists_the_known_ones():
    with pytest.raises(ValueError, match="booking_cancelled, booking_made"):
        hotel.verify({}, {}, {"type": "nope"})


def test_task_set_is_the_generators_output_and_complete(tasks):
    with open(DEFAULT_TASKS) as f:
        assert [json.loads(line) for line in f] == json.loads(json.dumps(hotel_tasks.generate()))
    assert len(tasks) >= 30
    for task in tasks:
        assert set(task.env_variables) == {"CURRENT_DATE", "LOGGED_IN_USER", "LOGGED_IN_NAME"}
        assert task.solution and task.verifier["type"] in hotel.VERIFIERS
    assert {t.difficulty for t in tasks} == {1, 2}
