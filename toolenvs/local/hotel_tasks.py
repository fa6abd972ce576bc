"""Deterministic generator of the hotel task set (``toolenvs/data/hotel.jsonl``).

Six families of graded difficulty: book a named hotel id on a date (1 call), book "starting today"
(1 call, the date comes from CURRENT_DATE), cancel a booking by id (1 call), book the cheapest hotel
in a city (search, then book), book a hotel by name (search, then book), cancel "my booking at" a hotel
(list, then cancel). Every reference solution is replayed in-process and must pass its verifier.

Regenerate with ``python -m toolenvs.local.hotel_tasks`` (or ``python -m toolenvs.local.generate``).
"""

from __future__ import annotations

import random
from datetime import date, timedelta
from typing import Any

from toolenvs.local import hotel, taskkit

USERS = [("alice", "Alice Martin"), ("bob", "Bob Chen"), ("carol", "Carol Diaz"), ("dan", "Dan Okafor")]
PER_FAMILY = 12


def _future(env_variables: dict[str, str], rng: random.Random) -> str:
    return (date.fromisoformat(env_variables["CURRENT_DATE"]) + timedelta(days=rng.randrange(1, 40))).isoformat()


def _seed_bookings(env_variables: dict[str, str], rng: random.Random) -> dict[str, Any]:
    """Two bookings of the user and one of somebody else, at distinct hotels."""
    hotels = rng.sample([h["hotel_id"] for h in hotel.CATALOGUE], 3)
    other = next(u for u, _ in USERS if u != env_variables["LOGGED_IN_USER"])
    guests = [env_variables["LOGGED_IN_USER"], env_variables["LOGGED_IN_USER"], other]
    ids = rng.sample(range(10, 99), 3)
    bookings = [
        {"booking_id": f"B{i}", "hotel_id": h, "guest": g, "check_in": _future(env_variables, rng), "nights": rng.randint(1, 5)}
        for i, h, g in zip(ids, hotels, guests)
    ]
    return {"bookings": bookings}


def _nights(n: int) -> str:
    """The stay spelled out: a number word is the only one of its kind in a prompt, so a small policy can
    find it by what it is; as a digit among the id's and the date's digits it was sampled at random."""
    return ["one night", "two nights", "three nights", "four nights", "five nights", "six nights"][n - 1]


def _book(hotel_id: str, check_in: str, nights: int) -> tuple[dict[str, Any], dict[str, Any]]:
    call = {"name": "book_hotel", "arguments": {"hotel_id": hotel_id, "check_in": check_in, "nights": nights}}
    return call, {"type": "booking_made", "hotel_id": hotel_id, "check_in": check_in, "nights": nights}


def _family_book_id(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    h = rng.choice(hotel.CATALOGUE)
    day, nights = _future(ev, rng), rng.randint(1, 6)
    call, verifier = _book(h["hotel_id"], day, nights)
    prompt = rng.choice(["Book hotel {h} for {n} from {d}.", "Please reserve {h} from {d} for {n}."])
    return {"prompt": prompt.format(h=h["hotel_id"], n=_nights(nights), d=day), "solution": [call], "verifier": verifier}


def _family_book_today(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    h = rng.choice(hotel.CATALOGUE)
    nights = rng.randint(1, 6)
    call, verifier = _book(h["hotel_id"], ev["CURRENT_DATE"], nights)
    return {"prompt": f"Book hotel {h['hotel_id']} for {_nights(nights)} starting today.", "solution": [call], "verifier": verifier}


def _family_cancel_id(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    seed = _seed_bookings(ev, rng)
    target = seed["bookings"][rng.randrange(2)]["booking_id"]
    return {
        "prompt": f"Cancel booking {target}.",
        "initial_state": seed,
        "solution": [{"name": "cancel_booking", "arguments": {"booking_id": target}}],
        "verifier": {"type": "booking_cancelled", "booking_id": target},
    }


def _family_book_cheapest(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    city = rng.choice(sorted({h["city"] for h in hotel.CATALOGUE}))
    cheapest = min((h for h in hotel.CATALOGUE if h["city"] == city), key=lambda h: h["price"])
    day, nights = _future(ev, rng), rng.randint(1, 6)
    call, verifier = _book(cheapest["hotel_id"], day, nights)
    return {
        "prompt": f"Book the cheapest hotel in {city} for {_nights(nights)} from {day}.",
        "solution": [{"name": "search_hotels", "arguments": {"city": city}}, call],
        "verifier": verifier,
    }


def _family_book_name(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    h = rng.choice(hotel.CATALOGUE)
    day, nights = _future(ev, rng), rng.randint(1, 6)
    call, verifier = _book(h["hotel_id"], day, nights)
    return {
        "prompt": f"Book {h['name']} in {h['city']} for {_nights(nights)} from {day}.",
        "solution": [{"name": "search_hotels", "arguments": {"city": h["city"]}}, call],
        "verifier": verifier,
    }


def _family_cancel_at(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    seed = _seed_bookings(ev, rng)
    target = seed["bookings"][rng.randrange(2)]
    return {
        "prompt": f"Cancel my booking at hotel {target['hotel_id']}.",
        "initial_state": seed,
        "solution": [
            {"name": "list_bookings", "arguments": {}},
            {"name": "cancel_booking", "arguments": {"booking_id": target["booking_id"]}},
        ],
        "verifier": {"type": "booking_cancelled", "booking_id": target["booking_id"]},
    }


FAMILIES = {
    "book_id": _family_book_id,
    "book_today": _family_book_today,
    "cancel_id": _family_cancel_id,
    "book_cheapest": _family_book_cheapest,
    "book_name": _family_book_name,
    "cancel_at": _family_cancel_at,
}


def generate(seed: int = 0) -> list[dict[str, Any]]:
    """All task records, each checked by replaying its solution against its verifier (seeded as the set always was)."""
    return taskkit.generate(hotel, FAMILIES, PER_FAMILY, seed, users=[user for user, _ in USERS], rng_seed=seed)


if __name__ == "__main__":
    print(f"wrote {taskkit.write(hotel, generate())}")
