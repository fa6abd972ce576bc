"""The local apps other than hotel: tools, errors and verifiers worked by hand, and every shipped task set."""

from __future__ import annotations

import importlib
import json

import pytest

from toolenvs.check import shipped_task_files
from toolenvs.local import GENERATORS, appkit, get_app, github, outlook, ticketmaster, zillow
from toolenvs.local.appkit import AppError
from toolenvs.task import load_task_files

ALICE = {"CURRENT_DATE": "2026-03-01", "LOGGED_IN_USER": "alice", "LOGGED_IN_NAME": "Alice Martin"}
NEW_APPS = ["github", "outlook", "ticketmaster", "zillow"]


def _run(app, seed, calls, env=ALICE):
    """(start, final, results) of in-process calls; errors come back as ``error: ...`` strings."""
    return app.replay(env, seed, calls)


# --- github ----------------------------------------------------------------------------------------

GH_SEED = {
    "issues": [
        {"repo": "alice/webapp", "number": 3, "title": "Crash on startup", "author": "bob", "labels": ["bug"]},
        {"repo": "alice/webapp", "number": 7, "title": "Typo in README"},
        {"repo": "carol/infra", "number": 1, "title": "Rotate keys", "author": "carol"},
        {"repo": "erin/docs", "number": 2, "title": "Fix my page", "author": "alice"},
        {"repo": "erin/docs", "number": 4, "title": "Other page", "author": "erin"},
    ],
    "pulls": [{"repo": "alice/webapp", "number": 9, "title": "Fix crash", "author": "bob"}],
}


def test_github_issues_numbers_and_access():
    state = github.initial_state(ALICE, GH_SEED)
    assert [i["number"] for i in github.list_issues(state, "alice/webapp")] == [3, 7]
    assert github.list_issues(state, "alice/webapp", label="bug") == [{"number": 3, "title": "Crash on startup"}]
    assert github.create_issue(state, "alice/webapp", "New one") == {"repo": "alice/webapp", "number": 10}  # after pull 9
    with pytest.raises(AppError, match="repo carol/infra not found"):  # private, alice is no collaborator
        github.list_issues(state, "carol/infra")
    with pytest.raises(AppError, match="status must be"):
        github.list_issues(state, "alice/webapp", status="any")


def test_github_permissions():
    state = github.initial_state(ALICE, GH_SEED)
    assert github.close_issue(state, "erin/docs", 2) == {"state": "closed"}  # her own issue in erin's repo
    with pytest.raises(AppError, match="permission denied"):
        github.close_issue(state, "erin/docs", 4)
    with pytest.raises(AppError, match="permission denied"):
        github.add_label(state, "erin/docs", 4, "bug")
    with pytest.raises(AppError, match="erin is not a collaborator of alice/webapp"):
        github.assign_issue(state, "alice/webapp", 3, "erin")
    with pytest.raises(AppError, match="label blocker not found"):
        github.add_label(state, "alice/webapp", 3, "blocker")
    with pytest.raises(AppError, match="bob wrote pull request 9"):
        github.request_review(state, "alice/webapp", 9, "bob")
    assert github.merge_pull(state, "alice/webapp", 9) == {"state": "merged"}
    with pytest.raises(AppError, match="pull request 9 is merged"):
        github.merge_pull(state, "alice/webapp", 9)
    with pytest.raises(AppError, match="issue 99 not found in alice/webapp"):
        github.comment_issue(state, "alice/webapp", 99, "hi")


# --- outlook ---------------------------------------------------------------------------------------

MAIL = {
    "messages": [
        {"id": 2, "sender": "bob", "to": "alice", "subject": "Lunch plans", "body": "Noon?"},
        {"id": 5, "sender": "carol", "to": "alice", "subject": "Budget review", "body": "See my notes."},
        {"id": 8, "sender": "bob", "to": "alice", "subject": "Quick sync", "body": "Can we meet?"},
    ],
    "events": [
        {"id": 4, "title": "Standup", "date": "2026-03-02", "start": "09:00", "end": "10:00", "organizer": "alice"},
        {"id": 6, "title": "Retro", "date": "2026-03-02", "start": "14:00", "end": "15:00", "organizer": "bob"},
    ],
}


def test_outlook_mail():
    state = outlook.initial_state(ALICE, MAIL)
    assert [m["id"] for m in outlook.list_messages(state, sender="bob")] == [8, 2]  # newest first
    assert outlook.read_message(state, 5)["body"] == "See my notes." and state["messages"]["5"]["read"]
    assert outlook.reply_message(state, 8, "Sure") == {"id": 9}
    assert state["messages"]["9"] | {} == {"id": 9, "folder": "sent", "sender": "alice", "to": "bob", "subject": "Re: Quick sync", "body": "Sure", "read": True}
    with pytest.raises(AppError, match="use inbox, archive or trash"):
        outlook.move_message(state, 2, "sent")
    with pytest.raises(AppError, match="folder spam not found"):
        outlook.list_messages(state, "spam")
    with pytest.raises(AppError, match="user zed not found"):
        outlook.send_message(state, "zed", "Hi", "Hello")
    with pytest.raises(AppError, match="message 99 not found"):
        outlook.read_message(state, 99)


def test_outlook_calendar():
    state = outlook.initial_state(ALICE, MAIL)
    assert [e["id"] for e in outlook.list_events(state, "2026-03-02")] == [4, 6]
    assert outlook.create_event(state, "Planning", "2026-03-01 16:30", hours=2, invite="dan") == {"id": 7}
    assert state["events"]["7"]["end"] == "18:30" and state["events"]["7"]["attendees"] == ["dan"]
    for when, hours, message in [("2026-02-28 10:00", 1, "in the past"), ("2026-03-05 25:00", 1, "use HH:MM"),
                                 ("2026-03-05", 1, "use HH:MM"), ("2026-03-05 22:00", 3, "end by midnight")]:
        with pytest.raises(AppError, match=message):
            outlook.create_event(state, "X", when, hours=hours)
    with pytest.raises(AppError, match="permission denied: event 6 is organised by bob"):
        outlook.cancel_event(state, 6)
    assert outlook.cancel_event(state, 4)["status"] == "cancelled"
    with pytest.raises(AppError, match="event 4 not found"):
        outlook.cancel_event(state, 4)


def test_outlook_verifier_ignores_reading():
    spec = {"type": "changes", "updated": {"messages": {"5": {"folder": "archive"}}}}
    start, final, _ = _run(outlook, MAIL, [("read_message", {"message_id": 8}), ("move_message", {"message_id": 5, "folder": "archive"})])
    assert outlook.verify(final, start, spec) == 1.0
    start, final, _ = _run(outlook, MAIL, [("move_message", {"message_id": 5, "folder": "archive"}), ("move_message", {"message_id": 2, "folder": "trash"})])
    assert outlook.verify(final, start, spec) == 0.0


# --- ticketmaster ----------------------------------------------------------------------------------

SHOWS = {
    "events": [
        {"event_id": 1, "name": "Jazz Night", "city": "Austin", "date": "2026-03-10", "price": 60, "seats": 3},
        {"event_id": 2, "name": "Rock Fest", "city": "Austin", "date": "2026-03-05", "price": 90},
        {"event_id": 3, "name": "Old Show", "city": "Austin", "date": "2026-02-01", "price": 50},
    ],
    "orders": [
        {"order_id": 10, "event_id": 2, "owner": "alice", "quantity": 2},
        {"order_id": 11, "event_id": 2, "owner": "bob", "quantity": 1},
        {"order_id": 12, "event_id": 3, "owner": "alice", "quantity": 1},
    ],
}


def test_ticketmaster_buy_and_search():
    state = ticketmaster.initial_state(ALICE, SHOWS)
    assert [e["event_id"] for e in ticketmaster.search_events(state, "austin")] == [2, 1]  # soonest first, past left out
    with pytest.raises(AppError, match="no upcoming events in Austin matching Opera"):
        ticketmaster.search_events(state, "Austin", "Opera")
    assert ticketmaster.buy_tickets(state, 1, 2) == {"order_id": 13, "quantity": 2}
    assert state["events"]["1"]["seats"] == 1
    for event_id, quantity, message in [(1, 2, "only 1 seats left"), (3, 1, "in the past"), (2, 9, "quantity must be 1 to 8"), (4, 1, "event 4 not found")]:
        with pytest.raises(AppError, match=message):
            ticketmaster.buy_tickets(state, event_id, quantity)


def test_ticketmaster_orders_are_the_owners():
    state = ticketmaster.initial_state(ALICE, SHOWS)
    assert [o["order_id"] for o in ticketmaster.list_orders(state)] == [10, 12]
    with pytest.raises(AppError, match="permission denied: order 11"):
        ticketmaster.cancel_order(state, 11)
    with pytest.raises(AppError, match="past event"):
        ticketmaster.cancel_order(state, 12)
    with pytest.raises(AppError, match="already yours"):
        ticketmaster.transfer_order(state, 10, "alice")
    assert ticketmaster.cancel_order(state, 10)["status"] == "cancelled" and state["events"]["2"]["seats"] == 102
    with pytest.raises(AppError, match="order 10 is cancelled"):
        ticketmaster.transfer_order(state, 10, "bob")


# --- zillow ----------------------------------------------------------------------------------------

HOMES = {
    "listings": [
        {"listing_id": 1, "address": "1 Oak St", "city": "Tampa", "price": 300000, "beds": 2},
        {"listing_id": 2, "address": "2 Elm St", "city": "Tampa", "price": 250000, "beds": 3},
        {"listing_id": 3, "address": "3 Pine St", "city": "Tampa", "price": 200000, "beds": 1, "status": "sold"},
        {"listing_id": 4, "address": "4 Main St", "city": "Tampa", "price": 400000, "beds": 4, "agent": "alice"},
    ],
    "tours": [{"tour_id": 5, "listing_id": 1, "user": "bob", "date": "2026-03-03", "hour": 10}],
}


def test_zillow_search_save_and_offer():
    state = zillow.initial_state(ALICE, HOMES)
    assert [x["listing_id"] for x in zillow.search_listings(state, "Tampa", min_beds=2)] == [2, 1, 4]
    assert [x["listing_id"] for x in zillow.search_listings(state, "Tampa", max_price=300000)] == [2, 1]
    assert zillow.save_listing(state, 2)["saved"] and zillow.list_saved(state) == [{"listing_id": 2, "address": "2 Elm St", "price": 250000}]
    with pytest.raises(AppError, match="already saved"):
        zillow.save_listing(state, 2)
    with pytest.raises(AppError, match="listing 3 is sold"):
        zillow.save_listing(state, 3)
    with pytest.raises(AppError, match="permission denied: you list 4"):
        zillow.make_offer(state, 4, 390000)
    with pytest.raises(AppError, match="amount must be"):
        zillow.make_offer(state, 1, 0)


def test_zillow_tours():
    state = zillow.initial_state(ALICE, HOMES)
    for date, hour, message in [("2026-02-27", 10, "in the past"), ("2026-03-04", 20, "hour must be 9 to 17"), ("soon", 10, "YYYY-MM-DD")]:
        with pytest.raises(AppError, match=message):
            zillow.schedule_tour(state, 1, date, hour)
    assert zillow.schedule_tour(state, 1, "2026-03-04", 11) == {"tour_id": 6}
    assert zillow.list_tours(state) == [{"tour_id": 6, "address": "1 Oak St", "date": "2026-03-04"}]
    with pytest.raises(AppError, match="permission denied: tour 5"):
        zillow.cancel_tour(state, 5)


# --- the changes verifier --------------------------------------------------------------------------


def test_changes_verifier_wants_exactly_the_named_changes():
    spec = {"type": "changes", "created": {"orders": [{"event_id": 1, "quantity": 2, "owner": "alice"}]},
            "updated": {"events": {"1": {"seats": 1}}}}
    cases = [
        ([("buy_tickets", {"event_id": 1, "quantity": 2})], 1.0),
        ([("buy_tickets", {"event_id": 1, "quantity": 1})], 0.0),  # wrong quantity
        ([("buy_tickets", {"event_id": 1, "quantity": 2}), ("transfer_order", {"order_id": 10, "to_user": "dan"})], 0.0),  # collateral
        ([("buy_tickets", {"event_id": 1, "quantity": 1}), ("buy_tickets", {"event_id": 1, "quantity": 1})], 0.0),  # two orders
        ([], 0.0),
    ]
    for calls, expected in cases:
        start, final, _ = _run(ticketmaster, SHOWS, calls)
        assert ticketmaster.verify(final, start, spec) == expected, calls


def test_changes_verifier_forgives_case_and_spacing_not_content():
    start, final, _ = _run(github, GH_SEED, [("create_issue", {"repo": "alice/webapp", "title": "  crash ON   startup "})])
    spec = {"type": "changes", "created": {"issues": [{"title": "Crash on startup"}]}}
    assert github.verify(final, start, spec) == 1.0
    assert github.verify(final, start, {"type": "changes", "created": {"issues": [{"title": "Crash at startup"}]}}) == 0.0
    final["issues"].pop("alice/webapp#3")  # a record that disappears fails whatever else matches
    assert github.verify(final, start, spec) == 0.0
    assert github.verify(start, start, {"type": "changes", "updated": {"issues": {"alice/webapp#99": {"state": "closed"}}}}) == 0.0


def test_unknown_verifier_and_tool_are_clear_errors():
    with pytest.raises(ValueError, match="unknown zillow verifier 'nope' \\(known: changes\\)"):
        zillow.verify({}, {}, {"type": "nope"})
    _, _, results = _run(zillow, HOMES, [("demolish", {}), ("save_listing", {"id": 1})])
    assert results[0] == "error: unknown tool demolish" and results[1].startswith("error: bad arguments for save_listing")


def test_a_verifier_spec_the_app_cannot_judge_is_named():
    """A spec its verifier would read a missing field from (a KeyError mid-episode), read with the wrong kind
    (``"nights": "5"`` never equals 5), or that names what no verifier reads (a collection the app lacks: the created
    record was never wanted, and doing nothing passed)."""
    from toolenvs.local import hotel

    made = {"type": "booking_made", "hotel_id": "H01", "check_in": "2026-03-01", "nights": 2}
    assert hotel.spec_problem(made) is None and hotel.spec_problem({"type": "booking_cancelled", "booking_id": "B1"}) is None
    assert hotel.spec_problem({**made, "check_in": None}) == "'check_in' = None (must be a date, YYYY-MM-DD)"
    assert hotel.spec_problem({k: v for k, v in made.items() if k != "check_in"}) == (
        "lacks 'check_in' (a 'booking_made' verifier reads hotel_id: text, check_in: a date, YYYY-MM-DD, nights: a whole number, 1 or more)")
    assert hotel.spec_problem({**made, "nights": "5"}) == "'nights' = '5' (must be a whole number, 1 or more)"
    assert hotel.spec_problem({**made, "nights": True}) == "'nights' = True (must be a whole number, 1 or more)"
    assert hotel.spec_problem({**made, "check_in": "2026-02-30"}) == "'check_in' = '2026-02-30' (must be a date, YYYY-MM-DD)"
    assert hotel.spec_problem({**made, "check_in": "2026-W05-1"}) == "'check_in' = '2026-W05-1' (must be a date, YYYY-MM-DD)"  # a week date
    assert hotel.spec_problem({**made, "guests": 2}).startswith("key(s) 'guests' that a 'booking_made' verifier does not read")
    assert hotel.spec_problem({"type": "no_such"}) is None  # an unknown type is its own refusal (the backend's problems)

    assert github.spec_problem({"type": "changes", "updated": {"issues": {"alice/webapp#99": {"state": "closed"}}}}) is None
    assert github.spec_problem({"type": "changes"}) is None  # nothing may change
    doing_nothing_passed = {"type": "changes", "created": {"issue": [{"title": "Bug"}]}}
    start = github.initial_state({}, {})
    assert github.verify(start, start, doing_nothing_passed) == 1.0  # why it is refused
    assert github.spec_problem(doing_nothing_passed).startswith("'created' names collection(s) 'issue' the app does not have (collections: ")
    assert github.spec_problem({"type": "changes", "created": {"issues": {"title": "Bug"}}}) == (
        "'created'['issues'] = {'title': 'Bug'} (must be a list of field sets)")
    assert github.spec_problem({"type": "changes", "updated": {"issues": [{"state": "closed"}]}}) == (
        "'updated'['issues'] = [{'state': 'closed'}] (must be a map from a record id to its fields)")
    assert github.spec_problem({"type": "changes", "created": [], "note": 1}) == (
        "key(s) 'note' that a 'changes' verifier does not read (it reads created, updated)")
    assert github.spec_problem({"type": "changes", "created": []}).startswith("'created' = [] (must map a collection to its records' fields")


# --- the shipped task sets -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shipped():
    return load_task_files(shipped_task_files())


@pytest.mark.parametrize("env_key", NEW_APPS)
def test_task_file_is_its_generators_output(env_key):
    with open(shipped_task_files()[0].parent / f"{env_key}.jsonl") as f:
        assert [json.loads(line) for line in f] == json.loads(json.dumps(importlib.import_module(GENERATORS[env_key]).generate()))


def test_shipped_task_sets_are_large_graded_and_personal(shipped):
    assert len(shipped) >= 400
    by_env = {key: [t for t in shipped if t.env_key == key] for key in {t.env_key for t in shipped}}
    assert set(by_env) == {"hotel", *NEW_APPS}
    assert sum(bool(t.env_variables) for t in shipped) >= 0.95 * len(shipped)
    for key in NEW_APPS:
        assert {t.difficulty for t in by_env[key]} >= {1, 2, 3, 4, 5}, key
        for task in by_env[key]:
            assert set(task.env_variables) == {"CURRENT_DATE", "LOGGED_IN_USER", "LOGGED_IN_NAME"}
            assert task.difficulty == len(task.solution) and task.verifier["type"] in get_app(key).VERIFIERS


def test_every_reference_solution_passes_in_process(shipped):
    """The fast twin of ``sweep envs check``: no tool error, verifier 1.0, and doing nothing scores 0; every spec readable."""
    for task in shipped:
        app = get_app(task.env_key)
        assert app.spec_problem(task.verifier) is None, task.task_key
        start, final, results = app.replay(task.env_variables, task.initial_state, [(c.name, c.arguments) for c in task.solution])
        assert not [r for r in results if isinstance(r, str) and r.startswith("error:")], task.task_key
        assert app.verify(final, start, task.verifier) == 1.0, task.task_key
        assert app.verify(start, start, task.verifier) == 0.0, task.task_key


@pytest.mark.parametrize("env_key", NEW_APPS)
def test_held_out_tasks_tokenize_with_the_shipped_vocabulary(env_key):
    """The tiny tokenizer's words come from the tasks it is built on (as grpo.warmstart builds it): another
    seed's tasks, with other ids, names and dates, must hardly ever meet an unknown word."""
    from grpo.tiny import build_tokenizer
    from grpo.warmstart import _extra_vocabulary, conversation_texts, reference_conversation
    from toolenvs.task import Task

    def texts(seed: int) -> list[str]:
        tasks = [Task.model_validate(r) for r in importlib.import_module(GENERATORS[env_key]).generate(seed)]
        return [text for t in tasks for text in conversation_texts(reference_conversation(t))]

    tokenizer = build_tokenizer(texts(0) + _extra_vocabulary())
    held_out = [i for text in texts(3) for i in tokenizer.encode(text, add_special_tokens=False)]
    assert held_out.count(tokenizer.unk_token_id) <= 0.001 * len(held_out)


@pytest.mark.parametrize("env_key", NEW_APPS)
def test_reference_episodes_fit_the_default_rollout_limits(env_key, shipped):
    """Each model turn fits max_generate_length and the context before every call fits max_input_length."""
    from grpo.chat import ChatFormat
    from grpo.config import RolloutConfig
    from grpo.tiny import build_tokenizer
    from grpo.warmstart import conversation_texts, reference_conversation

    limits = RolloutConfig()
    conversations = [reference_conversation(t) for t in shipped if t.env_key == env_key]
    chat = ChatFormat(build_tokenizer(text for conv in conversations for text in conversation_texts(conv)))
    for conv in conversations:
        ids = chat.prompt_ids(conv.messages)
        for text, result in conv.turns[:-1]:
            assert len(ids) <= limits.max_input_length
            own = chat.assistant_ids(text)
            assert len(own) <= limits.max_generate_length, text
            ids += own + chat.tool_turn_ids(result)
        assert len(ids) + 2 <= limits.max_sequence_length


def test_appkit_new_ids_follow_the_seed():
    state = {"orders": {"4": {}, "17": {}}, "counters": {}}
    assert [appkit.new_id(state, "orders") for _ in range(2)] == [18, 19]


def test_a_task_key_in_two_files_names_both(tmp_path):
    from configkit.base import ConfigError

    line = shipped_task_files()[0].read_text().splitlines()[0]
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text(line + "\n")
    second.write_text(line + "\n")
    with pytest.raises(ConfigError, match=f"{second}:1: key 'task_key' = .* is also in {first}:1"):
        load_task_files([first, second])


@pytest.mark.parametrize("env_key", NEW_APPS)
def test_generators_work_for_other_seeds(env_key):
    """Warm-start augmentation (``generated_tasks``) asks for other seeds; each must build, checked, and differ."""
    from toolenvs.local import generated_tasks

    shipped = [json.loads(line) for line in (shipped_task_files()[0].parent / f"{env_key}.jsonl").read_text().splitlines()]
    tasks = [t for seed in (1, 2, 7) for t in generated_tasks(env_key, seed)]
    assert len(tasks) == 3 * len(shipped)
    assert sum(t.prompt not in {r["prompt"] for r in shipped} for t in tasks) > len(tasks) // 2
