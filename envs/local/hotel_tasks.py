"""Deterministic generator of the hotel task set (``envs/data/hotel.jsonl``).

Six families of graded difficulty: book a named hotel id on a date (1 call), book "starting today"
(1 call, the date comes from CURRENT_DATE), cancel a booking by id (1 call), book the cheapest hotel
in a city (search, then book), book a hotel by name (search, then book), cancel "my booking at" a hotel
(list, then cancel). Every reference solution is replayed in-process and must pass its verifier.

Regenerate with ``python -m envs.local.hotel_tasks``.
"""

from __future__ import annotations

import json
import random
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from envs.local import hotel

OUTPUT = Path(__file__).resolve().parents[1] / "data" / "hotel.jsonl"
USERS = [("alice", "Alice Martin"), ("bob", "Bob Chen"), ("carol", "Carol Diaz"), ("dan", "Dan Okafor")]
PER_FAMILY = 12


def _env_variables(rng: random.Random) -> dict[str, str]:
    user, name = rng.choice(USERS)
    today = date(2026, 1, 5) + timedelta(days=rng.randrange(0, 150))
    return {"CURRENT_DATE": today.isoformat(), "LOGGED_IN_USER": user, "LOGGED_IN_NAME": name}


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
    """All task records, each checked by replaying its solution against its verifier."""
    rng = random.Random(seed)
    records = []
    for family, build in FAMILIES.items():
        for i in range(PER_FAMILY):
            ev = _env_variables(rng)
            body = build(rng, ev)
            record = {
                "task_key": f"hotel-{family}-{i:02d}",
                "prompt": body["prompt"],
                "env_key": hotel.ENV_KEY,
                "env_version": hotel.ENV_VERSION,
                "env_variables": ev,
                "initial_state": body.get("initial_state", {}),
                "verifier": body["verifier"],
                "solution": body["solution"],
                "difficulty": len(body["solution"]),
            }
            start, final, _ = hotel.replay(ev, record["initial_state"], [(c["name"], c["arguments"]) for c in record["solution"]])
            if hotel.verify(final, start, record["verifier"]) != 1.0:
                raise AssertionError(f"reference solution of {record['task_key']} fails its verifier")
            records.append(record)
    return records


def write(path: Path = OUTPUT, seed: int = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in generate(seed)))
    return path


if __name__ == "__main__":
    print(f"wrote {write()}")
