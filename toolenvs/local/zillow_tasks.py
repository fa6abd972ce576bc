"""Deterministic generator of the zillow task set (``toolenvs/data/zillow.jsonl``).

One call by id (save, tour, offer, cancel a tour), a search or list then one call (save the cheapest
home with enough beds, tour or make an offer on an address, cancel my tour of an address), fan-outs
(remove every saved home over a price) and chains of 3-6 dependent calls (shortlist: search, save and
tour the best match, then offer; cancel a tour and shortlist another home instead). Tour times are hours on the clock,
dates relative to CURRENT_DATE ("tomorrow") or absolute. Prices are multiples of 25,000.

Regenerate with ``python -m toolenvs.local.zillow_tasks`` (or ``python -m toolenvs.local.generate``).
"""

from __future__ import annotations

import random
from typing import Any

from toolenvs.local import taskkit, zillow
from toolenvs.local.taskkit import step

PER_FAMILY = 8
CITIES = ["Austin", "Denver", "Portland", "Tampa", "Raleigh"]
STREETS = ["Oak", "Pine", "Maple", "Cedar", "Elm", "Birch", "Lake", "Hill", "Park", "Main"]


def _changes(created: dict[str, list] | None = None, updated: dict[str, dict] | None = None) -> dict[str, Any]:
    return {"type": "changes", "created": created or {}, "updated": updated or {}}


def _world(rng: random.Random, ev: dict[str, str], n: int = 5, n_saved: int = 0, n_tours: int = 0) -> dict[str, Any]:
    """``n`` listings in one city with distinct prices and addresses (one sold), saved homes and tours of the user."""
    city = rng.choice(CITIES)
    ids, prices = rng.sample(range(1, 60), n), rng.sample(range(200_000, 900_001, 25_000), n)
    listings = [
        {"listing_id": i, "address": f"{rng.randint(1, 99)} {street} St", "city": city, "price": p, "beds": rng.randint(1, 4),
         "agent": rng.choice(taskkit.others(ev))}
        for i, p, street in zip(ids, prices, rng.sample(STREETS, n))
    ]
    listings[-1]["status"] = "sold"
    active = listings[:-1]
    saved = [{"save_id": k + 1, "listing_id": x["listing_id"], "user": ev["LOGGED_IN_USER"]} for k, x in enumerate(rng.sample(active, n_saved))]
    tours = [
        {"tour_id": t, "listing_id": x["listing_id"], "user": ev["LOGGED_IN_USER"], "date": taskkit.days_after(ev, rng.randint(1, 20)), "hour": rng.randint(9, 17)}
        for t, x in zip(rng.sample(range(1, 40), n_tours), rng.sample(active, n_tours))
    ]
    return {"listings": listings, "saved": saved, "tours": tours}


def _when(rng: random.Random, ev: dict[str, str]) -> tuple[str, str, int]:
    """(words for the prompt, ISO date, hour) of a tour."""
    days, hour = rng.choice([1, 1, 2, 5, 9, 14]), rng.randint(9, 17)
    day = taskkit.days_after(ev, days)
    words = "tomorrow" if days == 1 else f"on {day}"
    return f"{words} at {hour:02d}:00", day, hour


def _tour(listing: dict[str, Any], day: str, hour: int, ev: dict[str, str]) -> dict[str, Any]:
    return {"listing_id": listing["listing_id"], "date": day, "hour": hour, "user": ev["LOGGED_IN_USER"], "status": "booked"}


def _save_id(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    world = _world(rng, ev)
    home = rng.choice(world["listings"][:-1])
    return {
        "prompt": f"Save listing {home['listing_id']}.",
        "initial_state": world,
        "solution": [step("save_listing", listing_id=home["listing_id"])],
        "verifier": _changes(created={"saved": [{"listing_id": home["listing_id"], "user": ev["LOGGED_IN_USER"], "status": "saved"}]}),
    }


def _tour_id(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    world = _world(rng, ev)
    home, (words, day, hour) = rng.choice(world["listings"][:-1]), _when(rng, ev)
    return {
        "prompt": f"Book a tour of listing {home['listing_id']} {words}.",
        "initial_state": world,
        "solution": [step("schedule_tour", listing_id=home["listing_id"], date=day, hour=hour)],
        "verifier": _changes(created={"tours": [_tour(home, day, hour, ev)]}),
    }


def _offer_id(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    world = _world(rng, ev)
    home = rng.choice(world["listings"][:-1])
    amount = home["price"] - 25_000 * rng.randint(0, 2)
    return {
        "prompt": f"Offer {amount} for listing {home['listing_id']}.",
        "initial_state": world,
        "solution": [step("make_offer", listing_id=home["listing_id"], amount=amount)],
        "verifier": _changes(created={"offers": [{"listing_id": home["listing_id"], "amount": amount, "buyer": ev["LOGGED_IN_USER"]}]}),
    }


def _cancel_tour_id(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    world = _world(rng, ev, n_tours=2)
    tour = rng.choice(world["tours"])
    return {
        "prompt": f"Cancel tour {tour['tour_id']}.",
        "initial_state": world,
        "solution": [step("cancel_tour", tour_id=tour["tour_id"])],
        "verifier": _changes(updated={"tours": {str(tour["tour_id"]): {"status": "cancelled"}}}),
    }


def _cheapest(world: dict[str, Any], beds: int, max_price: int = 0) -> dict[str, Any]:
    fits = [x for x in world["listings"][:-1] if x["beds"] >= beds and (not max_price or x["price"] <= max_price)]
    return min(fits, key=lambda x: x["price"])


def _save_cheapest(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    world = _world(rng, ev)
    beds = rng.choice(sorted({x["beds"] for x in world["listings"][:-1]}))
    home, city = _cheapest(world, beds), world["listings"][0]["city"]
    return {
        "prompt": f"Save the cheapest home in {city} with at least {beds} beds.",
        "initial_state": world,
        "solution": [step("search_listings", city=city, min_beds=beds), step("save_listing", listing_id=home["listing_id"])],
        "verifier": _changes(created={"saved": [{"listing_id": home["listing_id"], "user": ev["LOGGED_IN_USER"]}]}),
    }


def _tour_address(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    world = _world(rng, ev)
    home, (words, day, hour) = rng.choice(world["listings"][:-1]), _when(rng, ev)
    return {
        "prompt": f"Book a tour of {home['address']} in {home['city']} {words}.",
        "initial_state": world,
        "solution": [step("search_listings", city=home["city"]), step("schedule_tour", listing_id=home["listing_id"], date=day, hour=hour)],
        "verifier": _changes(created={"tours": [_tour(home, day, hour, ev)]}),
    }


def _offer_asking(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    world = _world(rng, ev)
    home = rng.choice(world["listings"][:-1])
    return {
        "prompt": f"Offer the asking price for {home['address']} in {home['city']}.",
        "initial_state": world,
        "solution": [step("search_listings", city=home["city"]), step("make_offer", listing_id=home["listing_id"], amount=home["price"])],
        "verifier": _changes(created={"offers": [{"listing_id": home["listing_id"], "amount": home["price"]}]}),
    }


def _cancel_tour_address(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    world = _world(rng, ev, n_tours=3)
    tour = rng.choice(world["tours"])
    address = next(x["address"] for x in world["listings"] if x["listing_id"] == tour["listing_id"])
    return {
        "prompt": f"Cancel my tour of {address}.",
        "initial_state": world,
        "solution": [step("list_tours"), step("cancel_tour", tour_id=tour["tour_id"])],
        "verifier": _changes(updated={"tours": {str(tour["tour_id"]): {"status": "cancelled"}}}),
    }


def _unsave_over(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    world = _world(rng, ev, n=6, n_saved=4)
    prices = sorted(x["price"] for x in world["listings"] if x["listing_id"] in {s["listing_id"] for s in world["saved"]})
    limit = prices[rng.randint(0, 2)]
    gone = [s for s in world["saved"] if next(x["price"] for x in world["listings"] if x["listing_id"] == s["listing_id"]) > limit]
    return {
        "prompt": f"Remove every saved home priced over {limit}.",
        "initial_state": world,
        "solution": [step("list_saved")] + [step("unsave_listing", listing_id=s["listing_id"]) for s in sorted(gone, key=lambda s: s["listing_id"])],
        "verifier": _changes(updated={"saved": {str(s["save_id"]): {"status": "removed"} for s in gone}}),
    }


def _shortlist_steps(world: dict[str, Any], rng: random.Random, ev: dict[str, str]) -> tuple[str, list, dict[str, Any], dict[str, Any]]:
    """Prompt text, calls, home and tour spec of: search with limits, save the cheapest match, tour it."""
    beds = rng.choice(sorted({x["beds"] for x in world["listings"][:-1]}))
    budget = rng.choice(sorted(x["price"] for x in world["listings"][:-1] if x["beds"] >= beds)[-2:])
    home, city, (words, day, hour) = _cheapest(world, beds, budget), world["listings"][0]["city"], _when(rng, ev)
    text = f"save the cheapest home in {city} with {beds}+ beds under {budget}, book a tour {words}"
    calls = [
        step("search_listings", city=city, max_price=budget, min_beds=beds),
        step("save_listing", listing_id=home["listing_id"]),
        step("schedule_tour", listing_id=home["listing_id"], date=day, hour=hour),
    ]
    return text, calls, home, _tour(home, day, hour, ev)


def _shortlist(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    world = _world(rng, ev)
    text, calls, home, tour = _shortlist_steps(world, rng, ev)
    return {
        "prompt": f"{text[0].upper()}{text[1:]}.",
        "initial_state": world,
        "solution": calls,
        "verifier": _changes(created={"saved": [{"listing_id": home["listing_id"]}], "tours": [tour]}),
    }


def _shortlist_offer(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    world = _world(rng, ev)
    text, calls, home, tour = _shortlist_steps(world, rng, ev)
    return {
        "prompt": f"{text[0].upper()}{text[1:]} and offer the asking price.",
        "initial_state": world,
        "solution": [*calls, step("make_offer", listing_id=home["listing_id"], amount=home["price"])],
        "verifier": _changes(created={"saved": [{"listing_id": home["listing_id"]}], "tours": [tour],
                                      "offers": [{"listing_id": home["listing_id"], "amount": home["price"]}]}),
    }


def _swap_tour(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    world = _world(rng, ev, n=4, n_tours=1)
    old = world["tours"][0]
    address = next(x["address"] for x in world["listings"] if x["listing_id"] == old["listing_id"])
    text, calls, home, tour = _shortlist_steps(world, rng, ev)
    return {
        "prompt": f"Cancel my tour of {address}; instead {text}.",
        "initial_state": world,
        "solution": [step("list_tours"), step("cancel_tour", tour_id=old["tour_id"]), *calls],
        "verifier": _changes(
            created={"saved": [{"listing_id": home["listing_id"]}], "tours": [tour]},
            updated={"tours": {str(old["tour_id"]): {"status": "cancelled"}}},
        ),
    }


FAMILIES = {
    "save_id": _save_id,
    "tour_id": _tour_id,
    "offer_id": _offer_id,
    "cancel_tour_id": _cancel_tour_id,
    "save_cheapest": _save_cheapest,
    "tour_address": _tour_address,
    "offer_asking": _offer_asking,
    "cancel_tour_address": _cancel_tour_address,
    "unsave_over": _unsave_over,
    "shortlist": _shortlist,
    "shortlist_offer": _shortlist_offer,
    "swap_tour": _swap_tour,
}


def generate(seed: int = 0) -> list[dict[str, Any]]:
    return taskkit.generate(zillow, FAMILIES, PER_FAMILY, seed)


if __name__ == "__main__":
    print(f"wrote {taskkit.write(zillow, generate())}")
