"""Hotel booking app: state, tools and verifiers as plain functions over a JSON-able state dict.

The MCP server (``toolenvs.local.server``) exposes the tools; reference solutions and tests call them
directly. Tools raise the kit's ``AppError`` with a message the agent sees (``toolenvs.local.appkit``, whose
``call``, ``verify`` and ``replay`` it uses). Its state shape, tools, results and verifiers are frozen:
the shipped base policies were built on them. Dates are ISO ``YYYY-MM-DD``.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from toolenvs.local.appkit import COUNT, DAY, TEXT, AppError, InvalidArgument, NotFound, PermissionDenied, app_interface, parse_date

__all__ = ["AppError"]  # the app contract (toolenvs.local): the server catches it

ENV_KEY = "hotel"
ENV_VERSION = "1"

CATALOGUE: list[dict[str, Any]] = [
    {"hotel_id": "H01", "name": "Seine Lodge", "city": "Paris", "price": 180},
    {"hotel_id": "H02", "name": "Louvre Inn", "city": "Paris", "price": 140},
    {"hotel_id": "H03", "name": "Forum Suites", "city": "Rome", "price": 120},
    {"hotel_id": "H04", "name": "Tiber House", "city": "Rome", "price": 160},
    {"hotel_id": "H05", "name": "Shibuya Stay", "city": "Tokyo", "price": 210},
    {"hotel_id": "H06", "name": "Ginza Garden", "city": "Tokyo", "price": 170},
    {"hotel_id": "H07", "name": "Spree Hotel", "city": "Berlin", "price": 110},
    {"hotel_id": "H08", "name": "Mitte Rooms", "city": "Berlin", "price": 95},
    {"hotel_id": "H09", "name": "Tagus View", "city": "Lisbon", "price": 105},
    {"hotel_id": "H10", "name": "Alfama Nest", "city": "Lisbon", "price": 130},
    {"hotel_id": "H11", "name": "Fjord Point", "city": "Oslo", "price": 230},
    {"hotel_id": "H12", "name": "Harbour Hall", "city": "Oslo", "price": 190},
]
MAX_NIGHTS = 14


def initial_state(env_variables: dict[str, str], seed: dict[str, Any] | None = None) -> dict[str, Any]:
    """A fresh state for one episode: the catalogue, the user, today, and any seeded bookings."""
    seed = seed or {}
    bookings = {b["booking_id"]: {"status": "active", **b} for b in seed.get("bookings", [])}
    return {
        "user": env_variables.get("LOGGED_IN_USER", "guest"),
        "today": env_variables.get("CURRENT_DATE", "2026-01-01"),
        "hotels": {h["hotel_id"]: dict(h) for h in CATALOGUE},
        "bookings": bookings,
        "next_booking": int(seed.get("next_booking", 100)),
    }


def search_hotels(state: dict[str, Any], city: str) -> list[dict[str, Any]]:
    """Hotels in a city, cheapest first."""
    found = [h for h in state["hotels"].values() if h["city"].lower() == str(city).lower()]
    if not found:
        raise NotFound(f"no hotels in {city}")
    return [{"hotel_id": h["hotel_id"], "name": h["name"], "price": h["price"]} for h in sorted(found, key=lambda h: h["price"])]


def book_hotel(state: dict[str, Any], hotel_id: str, check_in: str, nights: int) -> dict[str, Any]:
    """Book a hotel for the logged-in user."""
    if hotel_id not in state["hotels"]:
        raise NotFound(f"hotel {hotel_id} not found")
    day = parse_date(check_in, "check_in")
    if day < date.fromisoformat(state["today"]):
        raise InvalidArgument(f"check_in {check_in} is in the past")
    if not 1 <= int(nights) <= MAX_NIGHTS:
        raise InvalidArgument(f"nights must be 1 to {MAX_NIGHTS}")
    booking_id = f"B{state['next_booking']}"
    state["next_booking"] += 1
    booking = {
        "booking_id": booking_id,
        "hotel_id": hotel_id,
        "guest": state["user"],
        "check_in": day.isoformat(),
        "nights": int(nights),
        "status": "active",
    }
    state["bookings"][booking_id] = booking
    return {"booking_id": booking_id, "hotel_id": hotel_id, "check_in": booking["check_in"], "nights": booking["nights"]}


def list_bookings(state: dict[str, Any]) -> list[dict[str, Any]]:
    """The logged-in user's active bookings."""
    return [
        {k: b[k] for k in ("booking_id", "hotel_id", "check_in", "nights")}
        for b in state["bookings"].values()
        if b["guest"] == state["user"] and b["status"] == "active"
    ]


def cancel_booking(state: dict[str, Any], booking_id: str) -> dict[str, Any]:
    """Cancel one of the logged-in user's bookings."""
    booking = state["bookings"].get(booking_id)
    if booking is None or booking["status"] != "active":
        raise NotFound(f"booking {booking_id} not found")
    if booking["guest"] != state["user"]:
        raise PermissionDenied(f"permission denied: booking {booking_id} belongs to another guest")
    booking["status"] = "cancelled"
    return {"booking_id": booking_id, "status": "cancelled"}


TOOLS = {f.__name__: f for f in (search_hotels, book_hotel, list_bookings, cancel_booking)}

PARAMETERS = {  # what each tool parameter is, in the tools' JSON schema (toolenvs.local.server)
    "city": "City name, e.g. Paris.",
    "hotel_id": "The hotel's id from search_hotels, e.g. H01.",
    "check_in": "Arrival date, YYYY-MM-DD, today or later.",
    "nights": "Number of nights to stay (an integer, at least 1).",
    "booking_id": "The booking's id from list_bookings, e.g. B100.",
}


# --- verifiers: read the final state, return a reward in [0, 1] -------------------------------------


def _new_bookings(state: dict[str, Any], start: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for bid, b in state["bookings"].items() if bid not in start["bookings"]]


def verify_booking_made(final: dict[str, Any], start: dict[str, Any], spec: dict[str, Any]) -> float:
    """Exactly one new active booking, with the hotel, date and nights asked for; nothing else changed."""
    new = _new_bookings(final, start)
    if len(new) != 1 or any(final["bookings"][bid]["status"] != b["status"] for bid, b in start["bookings"].items()):
        return 0.0
    b = new[0]
    ok = b["status"] == "active" and b["hotel_id"] == spec["hotel_id"] and b["check_in"] == spec["check_in"]
    return float(ok and b["nights"] == spec["nights"])


def verify_booking_cancelled(final: dict[str, Any], start: dict[str, Any], spec: dict[str, Any]) -> float:
    """The named booking is cancelled, no other booking changed, none added."""
    if _new_bookings(final, start):
        return 0.0
    for bid, b in start["bookings"].items():
        expected = "cancelled" if bid == spec["booking_id"] else b["status"]
        if final["bookings"][bid]["status"] != expected:
            return 0.0
    return 1.0


VERIFIERS, call, verify, replay, spec_problem = app_interface(
    ENV_KEY, TOOLS, initial_state, (), verifiers={"booking_made": verify_booking_made, "booking_cancelled": verify_booking_cancelled},
    fields={"booking_made": {"hotel_id": TEXT, "check_in": DAY, "nights": COUNT}, "booking_cancelled": {"booking_id": TEXT}},
)
