"""Real-estate listings app (env_key ``zillow``): search homes, save them, book tours, make offers.

A task seeds the listings (address, city, price, beds, status, listing agent) and the user's saved
homes and tours. Tours are booked on the hour from 09:00 to 17:00, today or later, of active listings;
only the person who booked a tour may cancel it; an offer needs an active listing the user does not
list themselves, at a positive price. Leaves out: mortgages, counter-offers, agents' side of the app.
"""

from __future__ import annotations

from typing import Any

from toolenvs.local import appkit
from toolenvs.local.appkit import AppError, Conflict, NotFound, PermissionDenied, State

__all__ = ["AppError"]
ENV_KEY = "zillow"
ENV_VERSION = "1"
TOUR_HOURS = (9, 17)
COLLECTIONS = ("listings", "saved", "tours", "offers")


def initial_state(env_variables: dict[str, str], seed: dict[str, Any] | None = None) -> State:
    """The seeded listings, saved homes, tours and offers."""
    seed = seed or {}
    state = appkit.base_state(env_variables)
    state["listings"] = appkit.keyed(seed.get("listings", []), "listing_id", {"status": "active", "agent": "erin"})
    state["saved"] = appkit.keyed(seed.get("saved", []), "save_id", {"status": "saved"})
    state["tours"] = appkit.keyed(seed.get("tours", []), "tour_id", {"status": "booked"})
    state["offers"] = appkit.keyed(seed.get("offers", []), "offer_id", {"status": "pending"})
    return state


def _active(state: State, listing_id: int) -> dict[str, Any]:
    listing = appkit.get(state, "listings", listing_id, "listing")
    if listing["status"] != "active":
        raise Conflict(f"listing {listing_id} is {listing['status']}")
    return listing


def _my_save(state: State, listing_id: int) -> dict[str, Any] | None:
    return next((s for s in state["saved"].values()
                 if s["listing_id"] == int(listing_id) and s["user"] == state["user"] and s["status"] == "saved"), None)


def search_listings(state: State, city: str, max_price: int = 0, min_beds: int = 0) -> list[dict[str, Any]]:
    """Active listings in a city with at least ``min_beds`` and at most ``max_price`` (0: any), cheapest first."""
    max_price = appkit.in_range(max_price, "max_price", 0, 100_000_000)
    min_beds = appkit.in_range(min_beds, "min_beds", 0, 20)
    found = [
        x for x in state["listings"].values()
        if x["city"].lower() == str(city).lower() and x["status"] == "active"
        and (not max_price or x["price"] <= max_price) and x["beds"] >= min_beds
    ]
    return [{"listing_id": x["listing_id"], "address": x["address"], "price": x["price"]} for x in sorted(found, key=lambda x: x["price"])]


def save_listing(state: State, listing_id: int) -> dict[str, Any]:
    """Save a listing to the logged-in user's favourites."""
    _active(state, listing_id)
    if _my_save(state, listing_id):
        raise Conflict(f"listing {listing_id} is already saved")
    save_id = appkit.new_id(state, "saved")
    state["saved"][str(save_id)] = {"save_id": save_id, "listing_id": int(listing_id), "user": state["user"], "status": "saved"}
    return {"listing_id": int(listing_id), "saved": True}


def list_saved(state: State) -> list[dict[str, Any]]:
    """The logged-in user's saved listings."""
    mine = [s for s in state["saved"].values() if s["user"] == state["user"] and s["status"] == "saved"]
    return [{"listing_id": s["listing_id"], "address": state["listings"][str(s["listing_id"])]["address"],
             "price": state["listings"][str(s["listing_id"])]["price"]} for s in sorted(mine, key=lambda s: s["listing_id"])]


def unsave_listing(state: State, listing_id: int) -> dict[str, Any]:
    """Remove a listing from the logged-in user's favourites."""
    save = _my_save(state, listing_id)
    if save is None:
        raise NotFound(f"listing {listing_id} is not in your saved homes")
    save["status"] = "removed"
    return {"listing_id": int(listing_id), "saved": False}


def schedule_tour(state: State, listing_id: int, date: str, hour: int) -> dict[str, Any]:
    """Book a tour of an active listing on a day at an hour from 9 to 17."""
    _active(state, listing_id)
    day = appkit.future_date(state, date, "date")
    hour = appkit.in_range(hour, "hour", *TOUR_HOURS)
    tour_id = appkit.new_id(state, "tours")
    state["tours"][str(tour_id)] = {"tour_id": tour_id, "listing_id": int(listing_id), "user": state["user"], "date": day, "hour": hour, "status": "booked"}
    return {"tour_id": tour_id}


def list_tours(state: State) -> list[dict[str, Any]]:
    """The logged-in user's booked tours."""
    mine = [t for t in state["tours"].values() if t["user"] == state["user"] and t["status"] == "booked"]
    return [{"tour_id": t["tour_id"], "address": state["listings"][str(t["listing_id"])]["address"], "date": t["date"]}
            for t in sorted(mine, key=lambda t: t["tour_id"])]


def cancel_tour(state: State, tour_id: int) -> dict[str, Any]:
    """Cancel a tour you booked."""
    tour = appkit.get(state, "tours", tour_id, "tour")
    if tour["status"] != "booked":
        raise Conflict(f"tour {tour_id} is {tour['status']}")
    if tour["user"] != state["user"]:
        raise PermissionDenied(f"permission denied: tour {tour_id} was booked by another user")
    tour["status"] = "cancelled"
    return {"tour_id": tour["tour_id"], "status": "cancelled"}


def make_offer(state: State, listing_id: int, amount: int) -> dict[str, Any]:
    """Offer to buy an active listing (not one you list yourself)."""
    listing = _active(state, listing_id)
    if listing["agent"] == state["user"]:
        raise PermissionDenied(f"permission denied: you list {listing_id} yourself")
    amount = appkit.in_range(amount, "amount", 1, 100_000_000)
    offer_id = appkit.new_id(state, "offers")
    state["offers"][str(offer_id)] = {"offer_id": offer_id, "listing_id": int(listing_id), "buyer": state["user"], "amount": amount, "status": "pending"}
    return {"offer_id": offer_id, "status": "pending"}


TOOLS = {f.__name__: f for f in (search_listings, save_listing, list_saved, unsave_listing, schedule_tour, list_tours,
                                  cancel_tour, make_offer)}

PARAMETERS = {  # what each tool parameter is, in the tools' JSON schema (toolenvs.local.server)
    "city": "City name.",
    "max_price": "Highest price in dollars (an integer; 0 for any).",
    "min_beds": "Fewest bedrooms (an integer; 0 for any).",
    "listing_id": "The listing's id from search_listings or list_saved (an integer).",
    "date": "The tour's day, YYYY-MM-DD.",
    "hour": "The tour's hour, 9 to 17 (an integer).",
    "tour_id": "The tour's id from list_tours (an integer).",
    "amount": "Offered price in dollars (an integer).",
}


VERIFIERS, call, verify, replay, spec_problem = appkit.app_interface(ENV_KEY, TOOLS, initial_state, COLLECTIONS)
