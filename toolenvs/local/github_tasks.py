"""Deterministic generator of the github task set (``toolenvs/data/github.jsonl``).

Families from one call (open, comment on, close an issue; merge a pull request by number) through
look-ups by title or author (2 calls) and chains that use a number the app returns (label and assign
a new issue: 3) to 4-6 dependent calls (close every issue with a label, move an issue between
repositories, merge a pull request and close the issue it fixes with a comment). Every task acts in a
repository where the logged-in user is a collaborator; the world also holds other people's work.

Regenerate with ``python -m toolenvs.local.github_tasks`` (or ``python -m toolenvs.local.generate``).
"""

from __future__ import annotations

import random
from typing import Any

from toolenvs.local import github, taskkit
from toolenvs.local.taskkit import step

PER_FAMILY = 8
ISSUE_TITLES = [
    "Login fails on Safari", "Crash on startup", "Typo in README", "Slow search page", "Broken link in footer",
    "Dark mode colors", "Upload times out", "Wrong date format", "Memory leak in worker", "Add export button",
    "Update install guide", "Flaky login test", "Password reset email missing", "Add retry to client",
]
PULL_TITLES = ["Fix login redirect", "Add dark mode", "Speed up search", "Fix upload timeout", "Update docs", "Bump version"]
COMMENTS = ["On it", "Can you share logs?", "Fixed in main", "Duplicate", "Thanks, looking now", "Needs a test"]


def _my_repos(ev: dict[str, str]) -> list[str]:
    return [r["repo"] for r in github.REPOS if ev["LOGGED_IN_USER"] in r["collaborators"]]


def _world(rng: random.Random, ev: dict[str, str], repo: str, n_issues: int = 4, n_pulls: int = 3) -> dict[str, Any]:
    """Issues and pull requests in the repo with distinct titles, numbers in 1..60, mixed authors."""
    people = [u for u in github.REPOS_BY_NAME[repo]["collaborators"]] + ["erin"]
    numbers = sorted(rng.sample(range(1, 61), n_issues + n_pulls))
    rng.shuffle(numbers)
    issues = [
        {"repo": repo, "number": numbers[i], "title": title, "author": rng.choice(people),
         "labels": rng.sample(github.LABELS[:4], rng.randint(0, 1))}
        for i, title in enumerate(rng.sample(ISSUE_TITLES, n_issues))
    ]
    pulls = [
        {"repo": repo, "number": numbers[n_issues + i], "title": title, "author": author}
        for i, (title, author) in enumerate(zip(rng.sample(PULL_TITLES, n_pulls), rng.sample(taskkit.others(ev), n_pulls)))
    ]
    return {"issues": issues, "pulls": pulls}


def _setup(rng: random.Random, ev: dict[str, str], **sizes: int) -> tuple[str, dict[str, Any]]:
    repo = rng.choice(_my_repos(ev))
    return repo, _world(rng, ev, repo, **sizes)


def _key(issue: dict[str, Any]) -> str:
    return f"{issue['repo']}#{issue['number']}"


def _changes(created: dict[str, list] | None = None, updated: dict[str, dict] | None = None) -> dict[str, Any]:
    return {"type": "changes", "created": created or {}, "updated": updated or {}}


def _next_number(world: dict[str, Any]) -> int:
    return max(r["number"] for kind in ("issues", "pulls") for r in world[kind]) + 1


def _open_issue(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    repo, world = _setup(rng, ev)
    title = rng.choice([t for t in ISSUE_TITLES if t not in {i["title"] for i in world["issues"]}])
    return {
        "prompt": f'Open an issue in {repo} titled "{title}".',
        "initial_state": world,
        "solution": [step("create_issue", repo=repo, title=title)],
        "verifier": _changes(created={"issues": [{"repo": repo, "title": title, "author": ev["LOGGED_IN_USER"]}]}),
    }


def _comment(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    repo, world = _setup(rng, ev)
    issue, text = rng.choice(world["issues"]), rng.choice(COMMENTS)
    return {
        "prompt": f'Comment "{text}" on issue {issue["number"]} in {repo}.',
        "initial_state": world,
        "solution": [step("comment_issue", repo=repo, number=issue["number"], body=text)],
        "verifier": _changes(created={"comments": [{"repo": repo, "number": issue["number"], "body": text, "author": ev["LOGGED_IN_USER"]}]}),
    }


def _close(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    repo, world = _setup(rng, ev)
    issue = rng.choice(world["issues"])
    return {
        "prompt": f"Close issue {issue['number']} in {repo}.",
        "initial_state": world,
        "solution": [step("close_issue", repo=repo, number=issue["number"])],
        "verifier": _changes(updated={"issues": {_key(issue): {"state": "closed"}}}),
    }


def _merge(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    repo, world = _setup(rng, ev)
    pull = rng.choice(world["pulls"])
    return {
        "prompt": f"Merge pull request {pull['number']} in {repo}.",
        "initial_state": world,
        "solution": [step("merge_pull", repo=repo, number=pull["number"])],
        "verifier": _changes(updated={"pulls": {_key(pull): {"state": "merged"}}}),
    }


def _close_by_title(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    repo, world = _setup(rng, ev)
    issue = rng.choice(world["issues"])
    return {
        "prompt": f'Close the issue "{issue["title"]}" in {repo}.',
        "initial_state": world,
        "solution": [step("list_issues", repo=repo), step("close_issue", repo=repo, number=issue["number"])],
        "verifier": _changes(updated={"issues": {_key(issue): {"state": "closed"}}}),
    }


def _assign_me(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    repo, world = _setup(rng, ev)
    issue, me = rng.choice(world["issues"]), ev["LOGGED_IN_USER"]
    return {
        "prompt": f'Assign the issue "{issue["title"]}" in {repo} to me.',
        "initial_state": world,
        "solution": [step("list_issues", repo=repo), step("assign_issue", repo=repo, number=issue["number"], assignee=me)],
        "verifier": _changes(updated={"issues": {_key(issue): {"assignee": me}}}),
    }


def _merge_by_author(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    repo, world = _setup(rng, ev)
    pull = rng.choice(world["pulls"])
    return {
        "prompt": f"Merge the open pull request by {pull['author']} in {repo}.",
        "initial_state": world,
        "solution": [step("list_pulls", repo=repo), step("merge_pull", repo=repo, number=pull["number"])],
        "verifier": _changes(updated={"pulls": {_key(pull): {"state": "merged"}}}),
    }


def _review_by_title(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    repo, world = _setup(rng, ev)
    candidates = {p["number"]: [u for u in github.REPOS_BY_NAME[repo]["collaborators"] if u not in (p["author"], ev["LOGGED_IN_USER"])]
                  for p in world["pulls"]}
    pull = rng.choice([p for p in world["pulls"] if candidates[p["number"]]])
    reviewer = rng.choice(candidates[pull["number"]])
    return {
        "prompt": f'Ask {reviewer} to review the pull request "{pull["title"]}" in {repo}.',
        "initial_state": world,
        "solution": [step("list_pulls", repo=repo), step("request_review", repo=repo, number=pull["number"], reviewer=reviewer)],
        "verifier": _changes(updated={"pulls": {_key(pull): {"reviewers": [reviewer]}}}),
    }


def _new_labelled(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    repo, world = _setup(rng, ev)
    title = rng.choice([t for t in ISSUE_TITLES if t not in {i["title"] for i in world["issues"]}])
    label, who = rng.choice(github.LABELS[:4]), rng.choice(github.REPOS_BY_NAME[repo]["collaborators"])
    number = _next_number(world)
    return {
        "prompt": f'Open an issue "{title}" in {repo}, label it {label} and assign it to {who}.',
        "initial_state": world,
        "solution": [
            step("create_issue", repo=repo, title=title),
            step("add_label", repo=repo, number=number, label=label),
            step("assign_issue", repo=repo, number=number, assignee=who),
        ],
        "verifier": _changes(created={"issues": [{"repo": repo, "title": title, "labels": [label], "assignee": who}]}),
    }


def _close_labelled(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    repo, world = _setup(rng, ev, n_issues=5)
    doomed = rng.sample(world["issues"], rng.randint(2, 3))
    for issue in world["issues"]:
        issue["labels"] = ["wontfix"] if issue in doomed else [lab for lab in issue["labels"] if lab != "wontfix"]
    return {
        "prompt": f"Close every open wontfix issue in {repo}.",
        "initial_state": world,
        "solution": [step("list_issues", repo=repo, label="wontfix")]
        + [step("close_issue", repo=repo, number=i["number"]) for i in sorted(doomed, key=lambda i: i["number"])],
        "verifier": _changes(updated={"issues": {_key(i): {"state": "closed"} for i in doomed}}),
    }


def _move_issue(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    source, world = _setup(rng, ev, n_issues=3, n_pulls=1)
    target = rng.choice([r for r in _my_repos(ev) if r != source])
    issue = rng.choice(world["issues"])
    note = f"Moved to {target}"
    return {
        "prompt": f'Move the issue "{issue["title"]}" from {source} to {target}: open it there, comment "{note}" on the old one and close it.',
        "initial_state": world,
        "solution": [
            step("list_issues", repo=source),
            step("create_issue", repo=target, title=issue["title"]),
            step("comment_issue", repo=source, number=issue["number"], body=note),
            step("close_issue", repo=source, number=issue["number"]),
        ],
        "verifier": _changes(
            created={"issues": [{"repo": target, "title": issue["title"]}], "comments": [{"repo": source, "number": issue["number"], "body": note}]},
            updated={"issues": {_key(issue): {"state": "closed"}}},
        ),
    }


def _fix_flow(rng: random.Random, ev: dict[str, str]) -> dict[str, Any]:
    repo, world = _setup(rng, ev, n_issues=2, n_pulls=2)
    pull, issue = rng.choice(world["pulls"]), rng.choice(world["issues"])
    note = f"Fixed in {pull['number']}"
    return {
        "prompt": f'Merge the pull request "{pull["title"]}" in {repo}, then comment "Fixed in <its number>" on the issue "{issue["title"]}" and close it.',
        "initial_state": world,
        "solution": [
            step("list_pulls", repo=repo),
            step("merge_pull", repo=repo, number=pull["number"]),
            step("list_issues", repo=repo),
            step("comment_issue", repo=repo, number=issue["number"], body=note),
            step("close_issue", repo=repo, number=issue["number"]),
        ],
        "verifier": _changes(
            created={"comments": [{"repo": repo, "number": issue["number"], "body": note}]},
            updated={"pulls": {_key(pull): {"state": "merged"}}, "issues": {_key(issue): {"state": "closed"}}},
        ),
    }


FAMILIES = {
    "open": _open_issue,
    "comment": _comment,
    "close": _close,
    "merge": _merge,
    "close_by_title": _close_by_title,
    "assign_me": _assign_me,
    "merge_by_author": _merge_by_author,
    "review_by_title": _review_by_title,
    "new_labelled": _new_labelled,
    "close_labelled": _close_labelled,
    "move_issue": _move_issue,
    "fix_flow": _fix_flow,
}


def generate(seed: int = 0) -> list[dict[str, Any]]:
    return taskkit.generate(github, FAMILIES, PER_FAMILY, seed)


if __name__ == "__main__":
    print(f"wrote {taskkit.write(github, generate())}")
