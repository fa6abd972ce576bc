"""Code hosting app (env_key ``github``): repositories, issues, comments and pull requests.

Repositories are fixed (``REPOS``: owner, collaborators, privacy); a task seeds the issues and pull
requests. Issues and pull requests share one number sequence per repository, as on GitHub. Reading and
opening issues needs only access to the repository (public, or a collaborator of a private one);
closing needs a collaborator or the issue's author; assigning, labelling, merging and review requests
need a collaborator. A private repository is "not found" to anyone else.
"""

from __future__ import annotations

from typing import Any

from toolenvs.local import appkit
from toolenvs.local.appkit import AppError, Conflict, InvalidArgument, NotFound, PermissionDenied, State

__all__ = ["AppError"]
ENV_KEY = "github"
ENV_VERSION = "1"
LABELS = ["bug", "docs", "feature", "urgent", "wontfix"]
REPOS: list[dict[str, Any]] = [
    {"repo": "alice/webapp", "private": False, "collaborators": ["alice", "bob"]},
    {"repo": "bob/api", "private": False, "collaborators": ["bob", "carol", "alice"]},
    {"repo": "carol/infra", "private": True, "collaborators": ["carol", "dan"]},
    {"repo": "dan/mobile", "private": False, "collaborators": ["dan", "alice", "erin"]},
    {"repo": "erin/docs", "private": False, "collaborators": ["erin", "bob", "carol", "dan"]},
    {"repo": "team/core", "private": True, "collaborators": ["alice", "bob", "carol", "dan"]},
]
REPOS_BY_NAME = {r["repo"]: r for r in REPOS}
COLLECTIONS = ("issues", "pulls", "comments")


def initial_state(env_variables: dict[str, str], seed: dict[str, Any] | None = None) -> State:
    """The repositories, the seeded issues and pull requests (keyed ``repo#number``), no comments."""
    seed = seed or {}
    state = appkit.base_state(env_variables)
    state["repos"] = {r["repo"]: {**r, "owner": r["repo"].split("/")[0]} for r in REPOS}
    state["issues"] = {_key(i["repo"], i["number"]): {"author": "erin", "state": "open", "assignee": "", "labels": [], **i}
                       for i in seed.get("issues", [])}
    state["pulls"] = {_key(p["repo"], p["number"]): {"author": "erin", "state": "open", "reviewers": [], **p}
                      for p in seed.get("pulls", [])}
    state["comments"] = {}
    return state


def _key(repo: str, number: Any) -> str:
    return f"{repo}#{number}"


def _repo(state: State, repo: str) -> dict[str, Any]:
    found = state["repos"].get(str(repo))
    if found is None or (found["private"] and state["user"] not in found["collaborators"]):
        raise NotFound(f"repo {repo} not found")
    return found


def _collaborator(state: State, repo: str, action: str) -> dict[str, Any]:
    found = _repo(state, repo)
    if state["user"] not in found["collaborators"]:
        raise PermissionDenied(f"permission denied: only collaborators of {repo} can {action}")
    return found


def _issue(state: State, repo: str, number: int) -> dict[str, Any]:
    _repo(state, repo)
    issue = state["issues"].get(_key(repo, number))
    if issue is None:
        raise NotFound(f"issue {number} not found in {repo}")
    return issue


def _next_number(state: State, repo: str) -> int:
    used = [r["number"] for kind in ("issues", "pulls") for r in state[kind].values() if r["repo"] == repo]
    return max(used, default=0) + 1


def list_issues(state: State, repo: str, status: str = "open", label: str = "") -> list[dict[str, Any]]:
    """Issues of a repository, by number; ``status`` is open, closed or all."""
    _repo(state, repo)
    if status not in ("open", "closed", "all"):
        raise InvalidArgument("status must be open, closed or all")
    return [
        {"number": i["number"], "title": i["title"]}
        for i in sorted(state["issues"].values(), key=lambda i: i["number"])
        if i["repo"] == repo and status in ("all", i["state"]) and (not label or label in i["labels"])
    ]


def create_issue(state: State, repo: str, title: str, body: str = "") -> dict[str, Any]:
    """Open an issue as the logged-in user."""
    _repo(state, repo)
    if not str(title).strip():
        raise InvalidArgument("title must not be empty")
    number = _next_number(state, repo)
    state["issues"][_key(repo, number)] = {
        "repo": repo, "number": number, "title": str(title), "body": str(body),
        "author": state["user"], "state": "open", "assignee": "", "labels": [],
    }
    return {"repo": repo, "number": number}


def comment_issue(state: State, repo: str, number: int, body: str) -> dict[str, Any]:
    """Comment on an issue."""
    _issue(state, repo, number)
    if not str(body).strip():
        raise InvalidArgument("body must not be empty")
    comment_id = appkit.new_id(state, "comments")
    state["comments"][str(comment_id)] = {"repo": repo, "number": int(number), "author": state["user"], "body": str(body)}
    return {"comment_id": comment_id}


def close_issue(state: State, repo: str, number: int) -> dict[str, Any]:
    """Close an open issue (collaborators and the issue's author may)."""
    issue = _issue(state, repo, number)
    if state["user"] != issue["author"] and state["user"] not in state["repos"][repo]["collaborators"]:
        raise PermissionDenied(f"permission denied: only collaborators of {repo} can close issue {number}")
    if issue["state"] != "open":
        raise Conflict(f"issue {number} is already closed")
    issue["state"] = "closed"
    return {"state": "closed"}


def assign_issue(state: State, repo: str, number: int, assignee: str) -> dict[str, Any]:
    """Assign an issue to a collaborator of its repository."""
    issue = _issue(state, repo, number)
    found = _collaborator(state, repo, "assign issues")
    if assignee not in found["collaborators"]:
        raise InvalidArgument(f"{assignee} is not a collaborator of {repo}")
    issue["assignee"] = assignee
    return {"assignee": assignee}


def add_label(state: State, repo: str, number: int, label: str) -> dict[str, Any]:
    """Add one of the repository's labels to an issue."""
    issue = _issue(state, repo, number)
    _collaborator(state, repo, "label issues")
    if label not in LABELS:
        raise NotFound(f"label {label} not found (labels: {', '.join(LABELS)})")
    if label not in issue["labels"]:
        issue["labels"] = [*issue["labels"], label]
    return {"labels": issue["labels"]}


def list_pulls(state: State, repo: str) -> list[dict[str, Any]]:
    """Open pull requests of a repository, by number."""
    _repo(state, repo)
    return [
        {"number": p["number"], "title": p["title"], "author": p["author"]}
        for p in sorted(state["pulls"].values(), key=lambda p: p["number"])
        if p["repo"] == repo and p["state"] == "open"
    ]


def _open_pull(state: State, repo: str, number: int) -> dict[str, Any]:
    _repo(state, repo)
    pull = state["pulls"].get(_key(repo, number))
    if pull is None:
        raise NotFound(f"pull request {number} not found in {repo}")
    if pull["state"] != "open":
        raise Conflict(f"pull request {number} is {pull['state']}")
    return pull


def merge_pull(state: State, repo: str, number: int) -> dict[str, Any]:
    """Merge an open pull request (collaborators only)."""
    pull = _open_pull(state, repo, number)
    _collaborator(state, repo, "merge")
    pull["state"] = "merged"
    return {"state": "merged"}


def request_review(state: State, repo: str, number: int, reviewer: str) -> dict[str, Any]:
    """Ask a collaborator other than the author to review an open pull request."""
    pull = _open_pull(state, repo, number)
    found = _collaborator(state, repo, "request reviews")
    if reviewer not in found["collaborators"]:
        raise InvalidArgument(f"{reviewer} is not a collaborator of {repo}")
    if reviewer == pull["author"]:
        raise Conflict(f"{reviewer} wrote pull request {number} and cannot review it")
    if reviewer not in pull["reviewers"]:
        pull["reviewers"] = [*pull["reviewers"], reviewer]
    return {"reviewers": pull["reviewers"]}


TOOLS = {f.__name__: f for f in (list_issues, create_issue, comment_issue, close_issue, assign_issue, add_label,
                                  list_pulls, merge_pull, request_review)}

PARAMETERS = {  # what each tool parameter is, in the tools' JSON schema (toolenvs.local.server)
    "repo": "Repository as owner/name, e.g. alice/webapp.",
    "status": "Which issues: open, closed or all.",
    "label": "A label name of the repository, e.g. bug ('' for any, when listing).",
    "title": "The issue's title.",
    "body": "Text of the issue or comment.",
    "number": "The issue's or pull request's number (an integer).",
    "assignee": "Username of a collaborator of the repository.",
    "reviewer": "Username of a collaborator other than the pull request's author.",
}


VERIFIERS, call, verify, replay, spec_problem = appkit.app_interface(ENV_KEY, TOOLS, initial_state, COLLECTIONS)
