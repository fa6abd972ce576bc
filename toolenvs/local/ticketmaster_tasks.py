"""Deterministic generator of the ticketmaster task set (``toolenvs/data/ticketmaster.jsonl``).

The easiest app: mostly one call by id (buy, cancel, transfer) or a look-up then one call (buy by
name, the cheapest show in a city, cancel or give away the order for a show), with a few chains of
3-5 dependent calls (buy and give to a friend, swap one show for another, cancel all my orders).
Each task's world mixes the user's orders with other people's and upcoming shows with past ones.

Regenerate with ``python -m toolenvs.local.ticketmaster_tasks`` (or ``python -m toolenvs.local.generate``).
"""

from __future__ import annotations

import random
from typing import Any

from toolenvs.local import taskkit, ticketmaster
from toolenvs.local.taskkit import step

PER_FAMILY = 9
SHOWS = ["Neon Harbor", "Velvet Tides", "Paper Moons", "Gold Rivers", "Static Bloom", "Blue Canyon", "Jazz Night", "City Ballet", "Rock Fest"]
CITIES = ["Chicago", "Austin", "Denver", "Boston", "Seattle"]


def _tickets(quantity: int) -> str:
    return f"{quantity} ticket{'s' if quantity != 1 else ''}"


def _changes(created: dict[str, list] | None = None, updated: dict[str, dict] | None = None) -> dict[str, Any]:
    return {"type": "changes", "created": created or {}, "updated": updated or {}}


def _world(rng: random.Random, ev: dict[str, str], n_events: int = 5, n_mine: int = 1) -> dict[str, Any]:
    """Events in two cities (one already past), my orders for ``n_mine`` upcoming ones, one of someone else's."""
    cities = rng.sample(CITIES, 2)
    ids = rng.sample(range(1, 60), n_events)
    events = [
        {"event_id": i, "name": name, "city": cities[k % 2], "date": taskkit.days_after(ev, rng.randint(2, 60)),
         "price": rng.randrange(40, 160, 5), "seats": rng.randint(20, 200)}
        for k, (i, name) in enumerate(zip(ids, rng.sample(SHOWS, n_events)))
    ]
    events[-1]["date"] = taskkit.days_after(ev, -rng.randint(1, 30))
    order_ids = rng.sample(range(1, 60), n_mine + 1)
    owners = [ev["LOGGED_IN_USER"]] * n_mine + [rng.choice(taskkit.others(ev))]
    orders = [
        {"order_id": o, "event_id": e["event_id"], "owner": who, "quantity": rng.randint(1, 4)}
        for o, e, who in zip(order_ids, rng.sample(events[:-1], n_mine + 1), owners)
    ]
    return {"events": events, "orders": orders}


def _bought(world: dict[str, Any], event: dict[str, Any], quantity: int, owner: str) -> dict[str, Any]:
    return {"orders": [{"event_id": event["event_id"], "quantity": quantity, "owner": owner}]}


def _seats(event: dict[str, Any], delta: int) -> dict[str, dict]:
    return {str(event["event_id"]): {"seats": event["seats"] + delta}}


def _mine(world: dict[str, Any], ev: dict[str, str]) -> list[dict[str, Any]]:
    return [o for o in world["orders"] if o["owner"] == ev["LOGGED_IN_USER"]]


def _event_of(world: dict[str, Any], order: dict[str, Any]) -> dict[str, Any]:
    return next(e for e in world["events"] if e["event_id"] == order["event_id"])


def _buy_id(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    world = _world(rng, ev)
    event, quantity = rng.choice(world["events"][:-1]), rng.randint(1, 6)
    prompt = rng.choice(["Buy {q} for event {e}.", "Get me {q} for event {e}."])
    return {
        "prompt": prompt.format(q=_tickets(quantity), e=event["event_id"]),
        "initial_state": world,
        "solution": [step("buy_tickets", event_id=event["event_id"], quantity=quantity)],
        "verifier": _changes(created=_bought(world, event, quantity, ev["LOGGED_IN_USER"]), updated={"events": _seats(event, -quantity)}),
    }


def _cancel_id(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    world = _world(rng, ev)
    order = _mine(world, ev)[0]
    return {
        "prompt": f"Cancel order {order['order_id']}.",
        "initial_state": world,
        "solution": [step("cancel_order", order_id=order["order_id"])],
        "verifier": _changes(updated={"orders": {str(order["order_id"]): {"status": "cancelled"}},
                                      "events": _seats(_event_of(world, order), order["quantity"])}),
    }


def _transfer_id(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    world = _world(rng, ev)
    order, friend = _mine(world, ev)[0], rng.choice(taskkit.others(ev))
    return {
        "prompt": f"Transfer order {order['order_id']} to {friend}.",
        "initial_state": world,
        "solution": [step("transfer_order", order_id=order["order_id"], to_user=friend)],
        "verifier": _changes(updated={"orders": {str(order["order_id"]): {"owner": friend}}}),
    }


def _buy_by_name(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    world = _world(rng, ev)
    event, quantity = rng.choice(world["events"][:-1]), rng.randint(1, 6)
    return {
        "prompt": f"Buy {_tickets(quantity)} for {event['name']} in {event['city']}.",
        "initial_state": world,
        "solution": [step("search_events", city=event["city"], query=event["name"]),
                     step("buy_tickets", event_id=event["event_id"], quantity=quantity)],
        "verifier": _changes(created=_bought(world, event, quantity, ev["LOGGED_IN_USER"]), updated={"events": _seats(event, -quantity)}),
    }


def _buy_cheapest(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    world = _world(rng, ev, n_events=6)
    city = world["events"][0]["city"]
    upcoming = [e for e in world["events"][:-1] if e["city"] == city]
    for k, e in enumerate(sorted(upcoming, key=lambda e: e["price"])):
        e["price"] += 5 * k  # distinct prices: one cheapest
    event, quantity = min(upcoming, key=lambda e: e["price"]), rng.randint(1, 4)
    return {
        "prompt": f"Buy {_tickets(quantity)} for the cheapest upcoming show in {city}.",
        "initial_state": world,
        "solution": [step("search_events", city=city), step("buy_tickets", event_id=event["event_id"], quantity=quantity)],
        "verifier": _changes(created=_bought(world, event, quantity, ev["LOGGED_IN_USER"]), updated={"events": _seats(event, -quantity)}),
    }


def _cancel_by_name(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    world = _world(rng, ev, n_mine=2)
    order = rng.choice(_mine(world, ev))
    event = _event_of(world, order)
    return {
        "prompt": f"Cancel my order for {event['name']}.",
        "initial_state": world,
        "solution": [step("list_orders"), step("cancel_order", order_id=order["order_id"])],
        "verifier": _changes(updated={"orders": {str(order["order_id"]): {"status": "cancelled"}}, "events": _seats(event, order["quantity"])}),
    }


def _give_by_name(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    world = _world(rng, ev, n_mine=2)
    order, friend = rng.choice(_mine(world, ev)), rng.choice(taskkit.others(ev))
    return {
        "prompt": f"Give my {_event_of(world, order)['name']} tickets to {friend}.",
        "initial_state": world,
        "solution": [step("list_orders"), step("transfer_order", order_id=order["order_id"], to_user=friend)],
        "verifier": _changes(updated={"orders": {str(order["order_id"]): {"owner": friend}}}),
    }


def _buy_and_give(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    world = _world(rng, ev)
    event, quantity, friend = rng.choice(world["events"][:-1]), rng.randint(1, 4), rng.choice(taskkit.others(ev))
    new_order = max(o["order_id"] for o in world["orders"]) + 1
    return {
        "prompt": f"Buy {_tickets(quantity)} for {event['name']} in {event['city']} and transfer the order to {friend}.",
        "initial_state": world,
        "solution": [
            step("search_events", city=event["city"], query=event["name"]),
            step("buy_tickets", event_id=event["event_id"], quantity=quantity),
            step("transfer_order", order_id=new_order, to_user=friend),
        ],
        "verifier": _changes(created=_bought(world, event, quantity, friend), updated={"events": _seats(event, -quantity)}),
    }


def _swap(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    world = _world(rng, ev)
    order = _mine(world, ev)[0]
    old = _event_of(world, order)
    new = rng.choice([e for e in world["events"][:-1] if e is not old])
    return {
        "prompt": f"Swap my {old['name']} tickets for the same number to {new['name']} in {new['city']}.",
        "initial_state": world,
        "solution": [
            step("list_orders"),
            step("cancel_order", order_id=order["order_id"]),
            step("search_events", city=new["city"], query=new["name"]),
            step("buy_tickets", event_id=new["event_id"], quantity=order["quantity"]),
        ],
        "verifier": _changes(
            created=_bought(world, new, order["quantity"], ev["LOGGED_IN_USER"]),
            updated={"orders": {str(order["order_id"]): {"status": "cancelled"}},
                     "events": {**_seats(old, order["quantity"]), **_seats(new, -order["quantity"])}},
        ),
    }


def _cancel_all(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    world = _world(rng, ev, n_events=6, n_mine=rng.randint(2, 4))
    mine = _mine(world, ev)
    return {
        "prompt": "Cancel all my orders.",
        "initial_state": world,
        "solution": [step("list_orders")] + [step("cancel_order", order_id=o["order_id"]) for o in sorted(mine, key=lambda o: o["order_id"])],
        "verifier": _changes(updated={"orders": {str(o["order_id"]): {"status": "cancelled"} for o in mine},
                                      "events": {k: v for o in mine for k, v in _seats(_event_of(world, o), o["quantity"]).items()}}),
    }


FAMILIES = {
    "buy_id": _buy_id,
    "cancel_id": _cancel_id,
    "transfer_id": _transfer_id,
    "buy_by_name": _buy_by_name,
    "buy_cheapest": _buy_cheapest,
    "cancel_by_name": _cancel_by_name,
    "give_by_name": _give_by_name,
    "buy_and_give": _buy_and_give,
    "swap": _swap,
    "cancel_all": _cancel_all,
}


def generate(seed: int = 0) -> list[dict[str, Any]]:
    return taskkit.generate(ticketmaster, FAMILIES, PER_FAMILY, seed)


if __name__ == "__main__":
    print(f"wrote {taskkit.write(ticketmaster, generate())}")
