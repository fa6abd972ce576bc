"""Deterministic generator of the outlook task set (``toolenvs/data/outlook.jsonl``).

Harder than the others on purpose: besides one-call sends, archives and calendar entries (some with a
date relative to CURRENT_DATE: "tomorrow", "in N days"), most families need look-ups first (reply to
the latest message from someone, cancel an event by title), fan out over several records (archive all
from a sender, clear a day of the events you organise) or chain five dependent calls (read a meeting
request, book the time it asks for, reply and archive it).

Regenerate with ``python -m toolenvs.local.outlook_tasks`` (or ``python -m toolenvs.local.generate``).
"""

from __future__ import annotations

import random
from typing import Any

from toolenvs.local import outlook, taskkit
from toolenvs.local.taskkit import step

PER_FAMILY = 8
SUBJECTS = ["Quick sync", "Budget review", "Lunch plans", "Report draft", "Offsite agenda", "Hiring update", "Q3 goals", "Travel request"]
BODIES = ["See my notes.", "Please take a look.", "Thanks for the update.", "Any thoughts?", "Draft is ready."]
TITLES = ["Standup", "Design review", "Planning", "Team lunch", "Retro", "Demo prep"]
HOURS = [9, 10, 11, 13, 14, 15, 16]
REPLIES = ["Sounds good", "Thanks", "On it", "See you then", "Will do"]


def _clock(hour: int) -> str:
    return f"{hour:02d}:00"


def _changes(created: dict[str, list] | None = None, updated: dict[str, dict] | None = None) -> dict[str, Any]:
    return {"type": "changes", "created": created or {}, "updated": updated or {}}


def _inbox(rng: random.Random, ev: dict[str, str], n: int = 4, senders: list[str] | None = None) -> list[dict[str, Any]]:
    """``n`` inbox messages with distinct subjects and ids in 1..40 (higher id = newer)."""
    ids = sorted(rng.sample(range(1, 41), n))
    senders = senders or [rng.choice(taskkit.others(ev)) for _ in range(n)]
    return [
        {"id": i, "sender": s, "to": ev["LOGGED_IN_USER"], "subject": subject, "body": rng.choice(BODIES)}
        for i, s, subject in zip(ids, senders, rng.sample(SUBJECTS, n))
    ]


def _day(rng: random.Random, ev: dict[str, str], n_mine: int, n_theirs: int) -> tuple[str, list[dict[str, Any]]]:
    """A day some days ahead with events: ``n_mine`` organised by the user, ``n_theirs`` by others."""
    day = taskkit.days_after(ev, rng.randint(1, 20))
    ids, hours = rng.sample(range(1, 41), n_mine + n_theirs), sorted(rng.sample(HOURS, n_mine + n_theirs))
    organizers = [ev["LOGGED_IN_USER"]] * n_mine + [rng.choice(taskkit.others(ev)) for _ in range(n_theirs)]
    rng.shuffle(organizers)
    events = [
        {"id": i, "title": t, "date": day, "start": _clock(h), "end": _clock(h + 1), "organizer": o}
        for i, t, h, o in zip(ids, rng.sample(TITLES, len(ids)), hours, organizers)
    ]
    return day, events


def _send(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    to, subject, body = rng.choice(taskkit.others(ev)), rng.choice(SUBJECTS), rng.choice(BODIES)
    return {
        "prompt": f'Email {to} with subject "{subject}" and body "{body}"',
        "solution": [step("send_message", to=to, subject=subject, body=body)],
        "verifier": _changes(created={"messages": [{"folder": "sent", "to": to, "subject": subject, "body": body}]}),
    }


def _add_event(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    title, day, hour, hours = rng.choice(TITLES), taskkit.days_after(ev, rng.randint(1, 30)), rng.choice(HOURS), rng.randint(1, 2)
    return {
        "prompt": f'Add "{title}" to my calendar on {day} from {_clock(hour)} to {_clock(hour + hours)}.',
        "solution": [step("create_event", title=title, when=f"{day} {_clock(hour)}", hours=hours)],
        "verifier": _changes(created={"events": [
            {"title": title, "date": day, "start": _clock(hour), "end": _clock(hour + hours), "organizer": ev["LOGGED_IN_USER"]}
        ]}),
    }


def _event_relative(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    days = rng.choice([0, 1, 1, 2, 3, 7])
    when = {0: "today", 1: "tomorrow", 7: "in a week"}.get(days, f"in {days} days")
    title, hour, who = rng.choice(TITLES), rng.choice(HOURS), rng.choice(taskkit.others(ev))
    day = taskkit.days_after(ev, days)
    return {
        "prompt": f'Schedule a one hour "{title}" {when} at {_clock(hour)} with {who}.',
        "solution": [step("create_event", title=title, when=f"{day} {_clock(hour)}", invite=who)],
        "verifier": _changes(created={"events": [{"title": title, "date": day, "start": _clock(hour), "end": _clock(hour + 1), "attendees": [who]}]}),
    }


def _archive_id(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    inbox = _inbox(rng, ev)
    target = rng.choice(inbox)
    return {
        "prompt": f"Archive message {target['id']}.",
        "initial_state": {"messages": inbox},
        "solution": [step("move_message", message_id=target["id"], folder="archive")],
        "verifier": _changes(updated={"messages": {str(target["id"]): {"folder": "archive"}}}),
    }


def _cancel_id(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    _, events = _day(rng, ev, 2, 1)
    target = rng.choice([e for e in events if e["organizer"] == ev["LOGGED_IN_USER"]])
    return {
        "prompt": f"Cancel event {target['id']}.",
        "initial_state": {"events": events},
        "solution": [step("cancel_event", event_id=target["id"])],
        "verifier": _changes(updated={"events": {str(target["id"]): {"status": "cancelled"}}}),
    }


def _reply_latest(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    sender = rng.choice(taskkit.others(ev))
    inbox = _inbox(rng, ev, 4, [sender, rng.choice(taskkit.others(ev)), sender, rng.choice(taskkit.others(ev))])
    latest, text = max((m for m in inbox if m["sender"] == sender), key=lambda m: m["id"]), rng.choice(REPLIES)
    return {
        "prompt": f'Reply "{text}" to the latest message from {sender}.',
        "initial_state": {"messages": inbox},
        "solution": [step("list_messages", sender=sender), step("reply_message", message_id=latest["id"], body=text)],
        "verifier": _changes(created={"messages": [{"folder": "sent", "to": sender, "subject": f"Re: {latest['subject']}", "body": text}]}),
    }


def _cancel_by_title(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    day, events = _day(rng, ev, 2, 1)
    target = rng.choice([e for e in events if e["organizer"] == ev["LOGGED_IN_USER"]])
    return {
        "prompt": f'Cancel my event "{target["title"]}" on {day}.',
        "initial_state": {"events": events},
        "solution": [step("list_events", date=day), step("cancel_event", event_id=target["id"])],
        "verifier": _changes(updated={"events": {str(target["id"]): {"status": "cancelled"}}}),
    }


def _archive_from(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    sender, other = rng.sample(taskkit.others(ev), 2)
    senders = [sender] * rng.randint(2, 3) + [other] * 2
    rng.shuffle(senders)
    inbox = _inbox(rng, ev, len(senders), senders)
    mine = sorted((m for m in inbox if m["sender"] == sender), key=lambda m: -m["id"])
    return {
        "prompt": f"Archive all messages from {sender}.",
        "initial_state": {"messages": inbox},
        "solution": [step("list_messages", sender=sender)] + [step("move_message", message_id=m["id"], folder="archive") for m in mine],
        "verifier": _changes(updated={"messages": {str(m["id"]): {"folder": "archive"} for m in mine}}),
    }


def _forward(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    inbox = _inbox(rng, ev)
    message = rng.choice(inbox)
    to = rng.choice([u for u in taskkit.others(ev) if u != message["sender"]])
    return {
        "prompt": f'Forward the message "{message["subject"]}" from {message["sender"]} to {to} with the same subject and body.',
        "initial_state": {"messages": inbox},
        "solution": [
            step("list_messages", sender=message["sender"]),
            step("read_message", message_id=message["id"]),
            step("send_message", to=to, subject=message["subject"], body=message["body"]),
        ],
        "verifier": _changes(created={"messages": [{"folder": "sent", "to": to, "subject": message["subject"], "body": message["body"]}]}),
    }


def _clear_day(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    day, events = _day(rng, ev, rng.randint(2, 3), 1)
    mine = [e for e in events if e["organizer"] == ev["LOGGED_IN_USER"]]
    return {
        "prompt": f"Cancel every event I organise on {day}.",
        "initial_state": {"events": events},
        "solution": [step("list_events", date=day)] + [step("cancel_event", event_id=e["id"]) for e in mine],
        "verifier": _changes(updated={"events": {str(e["id"]): {"status": "cancelled"} for e in mine}}),
    }


def _meeting_request(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    inbox = _inbox(rng, ev, 3)
    request = rng.choice(inbox)
    day, hour = taskkit.days_after(ev, rng.randint(1, 14)), rng.choice(HOURS)
    request["body"] = f"Can we meet on {day} at {_clock(hour)}?"
    sender = request["sender"]
    return {
        "prompt": f'{sender} asked to meet in "{request["subject"]}". Book that hour with the subject as title, '
                  f'invite {sender}, reply "Booked" and archive the message.',
        "initial_state": {"messages": inbox},
        "solution": [
            step("list_messages", sender=sender),
            step("read_message", message_id=request["id"]),
            step("create_event", title=request["subject"], when=f"{day} {_clock(hour)}", invite=sender),
            step("reply_message", message_id=request["id"], body="Booked"),
            step("move_message", message_id=request["id"], folder="archive"),
        ],
        "verifier": _changes(
            created={
                "events": [{"title": request["subject"], "date": day, "start": _clock(hour), "end": _clock(hour + 1), "attendees": [sender]}],
                "messages": [{"folder": "sent", "to": sender, "body": "Booked"}],
            },
            updated={"messages": {str(request["id"]): {"folder": "archive"}}},
        ),
    }


FAMILIES = {
    "send": _send,
    "add_event": _add_event,
    "event_relative": _event_relative,
    "archive_id": _archive_id,
    "cancel_id": _cancel_id,
    "reply_latest": _reply_latest,
    "cancel_by_title": _cancel_by_title,
    "archive_from": _archive_from,
    "forward": _forward,
    "clear_day": _clear_day,
    "meeting_request": _meeting_request,
}


def generate(seed: int = 0) -> list[dict[str, Any]]:
    return taskkit.generate(outlook, FAMILIES, PER_FAMILY, seed)


if __name__ == "__main__":
    print(f"wrote {taskkit.write(outlook, generate())}")
