"""Ticket sales app (env_key ``ticketmaster``): upcoming events, orders, cancellations and transfers.

A task seeds the events (name, city, date, price, seats left) and the orders already placed. Buying
takes 1 to 8 seats of an event that has not happened and has them left; only an order's owner may
cancel it (before the event, seats go back) or transfer it to another user. Leaves out: payment,
seat maps, resale prices.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from toolenvs.local import appkit
from toolenvs.local.appkit import AppError, Conflict, NotFound, PermissionDenied, State

__all__ = ["AppError"]
ENV_KEY = "ticketmaster"
ENV_VERSION = "1"
MAX_TICKETS = 8
COLLECTIONS = ("events", "orders")


def initial_state(env_variables: dict[str, str], seed: dict[str, Any] | None = None) -> State:
    """The seeded events and orders."""
    seed = seed or {}
    state = appkit.base_state(env_variables)
    state["events"] = appkit.keyed(seed.get("events", []), "event_id", {"seats": 100})
    state["orders"] = appkit.keyed(seed.get("orders", []), "order_id", {"status": "active"})
    return state


def _upcoming(state: State, event: dict[str, Any]) -> bool:
    return date.fromisoformat(event["date"]) >= date.fromisoformat(state["today"])


def _own_order(state: State, order_id: int) -> dict[str, Any]:
    order = appkit.get(state, "orders", order_id, "order")
    if order["status"] != "active":
        raise Conflict(f"order {order_id} is {order['status']}")
    if order["owner"] != state["user"]:
        raise PermissionDenied(f"permission denied: order {order_id} belongs to another user")
    return order


def search_events(state: State, city: str, query: str = "") -> list[dict[str, Any]]:
    """Upcoming events in a city whose name contains ``query``, soonest first."""
    found = [
        e for e in state["events"].values()
        if e["city"].lower() == str(city).lower() and str(query).lower() in e["name"].lower() and _upcoming(state, e)
    ]
    if not found:
        raise NotFound(f"no upcoming events in {city}" + (f" matching {query}" if query else ""))
    return [{"event_id": e["event_id"], "name": e["name"], "date": e["date"], "price": e["price"]}
            for e in sorted(found, key=lambda e: (e["date"], e["event_id"]))]


def buy_tickets(state: State, event_id: int, quantity: int) -> dict[str, Any]:
    """Buy seats for the logged-in user."""
    event = appkit.get(state, "events", event_id, "event")
    if not _upcoming(state, event):
        raise Conflict(f"event {event_id} was on {event['date']}, in the past")
    quantity = appkit.in_range(quantity, "quantity", 1, MAX_TICKETS)
    if quantity > event["seats"]:
        raise Conflict(f"only {event['seats']} seats left for event {event_id}")
    event["seats"] -= quantity
    order_id = appkit.new_id(state, "orders")
    state["orders"][str(order_id)] = {"order_id": order_id, "event_id": int(event_id), "owner": state["user"], "quantity": quantity, "status": "active"}
    return {"order_id": order_id, "quantity": quantity}


def list_orders(state: State) -> list[dict[str, Any]]:
    """The logged-in user's active orders."""
    return [
        {"order_id": o["order_id"], "event": state["events"][str(o["event_id"])]["name"], "quantity": o["quantity"]}
        for o in sorted(state["orders"].values(), key=lambda o: o["order_id"])
        if o["owner"] == state["user"] and o["status"] == "active"
    ]


def cancel_order(state: State, order_id: int) -> dict[str, Any]:
    """Cancel one of your orders before its event; the seats go back on sale."""
    order = _own_order(state, order_id)
    event = state["events"][str(order["event_id"])]
    if not _upcoming(state, event):
        raise Conflict(f"order {order_id} is for a past event and cannot be cancelled")
    order["status"] = "cancelled"
    event["seats"] += order["quantity"]
    return {"order_id": order["order_id"], "status": "cancelled"}


def transfer_order(state: State, order_id: int, to_user: str) -> dict[str, Any]:
    """Give one of your orders to another user."""
    order = _own_order(state, order_id)
    to_user = appkit.require_user(to_user)
    if to_user == state["user"]:
        raise Conflict(f"order {order_id} is already yours")
    order["owner"] = to_user
    return {"order_id": order["order_id"], "owner": to_user}


TOOLS = {f.__name__: f for f in (search_events, buy_tickets, list_orders, cancel_order, transfer_order)}

PARAMETERS = {  # what each tool parameter is, in the tools' JSON schema (toolenvs.local.server)
    "city": "City name.",
    "query": "Text the event's name contains ('' for all).",
    "event_id": "The event's id from search_events (an integer).",
    "quantity": "Number of seats (an integer, at least 1).",
    "order_id": "The order's id from list_orders (an integer).",
    "to_user": "Username of the user who receives the order.",
}


VERIFIERS, call, verify, replay, spec_problem = appkit.app_interface(ENV_KEY, TOOLS, initial_state, COLLECTIONS)
