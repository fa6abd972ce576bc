"""Email and calendar app (env_key ``outlook``): the logged-in user's mailbox and a shared calendar.

Messages live in folders (inbox, archive, sent, trash); reading one marks it read (a change verifiers
ignore). Events are on a shared calendar: anyone can list a day, only the organiser can cancel, and a
new event must be today or later, end by midnight, and invite a known user. Leaves out: threads,
attachments, recurring events.
"""

from __future__ import annotations

from typing import Any

from toolenvs.local import appkit
from toolenvs.local.appkit import AppError, InvalidArgument, NotFound, PermissionDenied, State

__all__ = ["AppError"]
ENV_KEY = "outlook"
ENV_VERSION = "1"
FOLDERS = ("inbox", "archive", "sent", "trash")
COLLECTIONS = ("messages", "events")
IGNORED = frozenset({"read"})


def initial_state(env_variables: dict[str, str], seed: dict[str, Any] | None = None) -> State:
    """The seeded messages (the user's mailbox) and calendar events."""
    seed = seed or {}
    state = appkit.base_state(env_variables)
    state["messages"] = appkit.keyed(seed.get("messages", []), "id", {"folder": "inbox", "read": False, "body": ""})
    state["events"] = appkit.keyed(seed.get("events", []), "id", {"attendees": [], "status": "active"})
    return state


def _message(state: State, message_id: int) -> dict[str, Any]:
    return appkit.get(state, "messages", message_id, "message")


def list_messages(state: State, folder: str = "inbox", sender: str = "") -> list[dict[str, Any]]:
    """Messages in a folder, newest first, optionally only from one sender."""
    if folder not in FOLDERS:
        raise NotFound(f"folder {folder} not found (folders: {', '.join(FOLDERS)})")
    found = [m for m in state["messages"].values() if m["folder"] == folder and (not sender or m["sender"] == sender)]
    return [{"id": m["id"], "sender": m["sender"], "subject": m["subject"]} for m in sorted(found, key=lambda m: -m["id"])]


def read_message(state: State, message_id: int) -> dict[str, Any]:
    """A message's full text; marks it read."""
    message = _message(state, message_id)
    message["read"] = True
    return {"id": message["id"], "sender": message["sender"], "subject": message["subject"], "body": message["body"]}


def _store_sent(state: State, to: str, subject: str, body: str) -> dict[str, Any]:
    if not str(subject).strip():
        raise InvalidArgument("subject must not be empty")
    message_id = appkit.new_id(state, "messages")
    state["messages"][str(message_id)] = {
        "id": message_id, "folder": "sent", "sender": state["user"], "to": appkit.require_user(to),
        "subject": str(subject), "body": str(body), "read": True,
    }
    return {"id": message_id}


def send_message(state: State, to: str, subject: str, body: str) -> dict[str, Any]:
    """Send an email to a user."""
    return _store_sent(state, to, subject, body)


def reply_message(state: State, message_id: int, body: str) -> dict[str, Any]:
    """Reply to a message's sender with ``Re: <subject>``."""
    message = _message(state, message_id)
    if message["sender"] == state["user"]:
        raise InvalidArgument(f"message {message_id} is your own: reply to a received message")
    subject = message["subject"] if message["subject"].startswith("Re: ") else f"Re: {message['subject']}"
    return _store_sent(state, message["sender"], subject, body)


def move_message(state: State, message_id: int, folder: str) -> dict[str, Any]:
    """Move a message to another folder (inbox, archive or trash)."""
    message = _message(state, message_id)
    if folder not in FOLDERS or folder == "sent":
        raise InvalidArgument(f"cannot move to {folder}: use inbox, archive or trash")
    message["folder"] = folder
    return {"id": message["id"], "folder": folder}


def list_events(state: State, date: str) -> list[dict[str, Any]]:
    """The active events on a day, by start time."""
    day = appkit.parse_date(date, "date").isoformat()
    found = sorted((e for e in state["events"].values() if e["date"] == day and e["status"] == "active"), key=lambda e: e["start"])
    return [{"id": e["id"], "title": e["title"], "start": e["start"], "organizer": e["organizer"]} for e in found]


def create_event(state: State, title: str, when: str, hours: int = 1, invite: str = "") -> dict[str, Any]:
    """Put an event on the calendar at ``when`` (``YYYY-MM-DD HH:MM``) for ``hours``, organised by the logged-in user."""
    day_text, _, time_text = str(when).partition(" ")
    day = appkit.future_date(state, day_text, "date")
    start = appkit.parse_time(time_text, "time")
    length = appkit.in_range(hours, "hours", 1, 23)
    if int(start[:2]) + length > 24:
        raise InvalidArgument(f"the event must end by midnight: {hours} hours from {start} is too long")
    if not str(title).strip():
        raise InvalidArgument("title must not be empty")
    attendees = [appkit.require_user(invite)] if invite else []
    event_id = appkit.new_id(state, "events")
    state["events"][str(event_id)] = {
        "id": event_id, "title": str(title), "date": day, "start": start, "end": f"{int(start[:2]) + length:02d}:{start[3:]}",
        "organizer": state["user"], "attendees": attendees, "status": "active",
    }
    return {"id": event_id}


def cancel_event(state: State, event_id: int) -> dict[str, Any]:
    """Cancel an event the logged-in user organises."""
    event = appkit.get(state, "events", event_id, "event")
    if event["status"] != "active":
        raise NotFound(f"event {event_id} not found")
    if event["organizer"] != state["user"]:
        raise PermissionDenied(f"permission denied: event {event_id} is organised by {event['organizer']}")
    event["status"] = "cancelled"
    return {"id": event["id"], "status": "cancelled"}


TOOLS = {f.__name__: f for f in (list_messages, read_message, send_message, reply_message, move_message,
                                  list_events, create_event, cancel_event)}

PARAMETERS = {  # what each tool parameter is, in the tools' JSON schema (toolenvs.local.server)
    "folder": "Mail folder: inbox, archive or trash.",
    "sender": "Only messages from this address ('' for all).",
    "message_id": "The message's id from list_messages (an integer).",
    "to": "Recipient's address.",
    "subject": "The email's subject line.",
    "body": "Text of the email.",
    "date": "A day, YYYY-MM-DD.",
    "title": "The event's title.",
    "when": "Start, YYYY-MM-DD HH:MM.",
    "hours": "Duration in hours (an integer, at least 1).",
    "invite": "Address of one user to invite ('' for none).",
    "event_id": "The event's id from list_events (an integer).",
}


VERIFIERS, call, verify, replay, spec_problem = appkit.app_interface(ENV_KEY, TOOLS, initial_state, COLLECTIONS, IGNORED)
