"""Secret-looking names and URIs, hidden in messages (configkit.redact); hand-written cases."""

from __future__ import annotations

import pytest

from configkit.redact import looks_secret, redact_text, redact_uri, shown_value


@pytest.mark.parametrize("name, secret", [
    ("logging.wandb.api_key", True), ("aws_secret_access_key", True), ("live_token", True), ("trainer.password", True),
    ("AWS_SESSION_TOKEN", True), ("auth", True), ("AWSAccessKeyId", True), ("SecretAccessKey", True), ("awssecretaccesskey", True),
    ("access-key", True), ("pwd", True), ("x-amz-security-token", True),
    ("max_tokens", False), ("micro_batch_tokens", False), ("env.env_keys", False), ("task_key", False), ("author", False),
    ("optim.lr", False), ("storage", False), ("tokenizer", False), ("key", False), ("env_key", False),
])
def test_names_like_a_secret(name, secret):
    assert looks_secret(name) is secret


def test_a_uris_secrets_are_hidden_and_the_rest_kept():
    assert redact_uri("s3://AKIA:pw@bucket/p?aws_secret_access_key=x&endpoint_override=h:1&scheme=http") == \
        "s3://***@bucket/p?aws_secret_access_key=***&endpoint_override=h:1&scheme=http"
    assert redact_uri("s3://bucket/p?region=eu-west-1") == "s3://bucket/p?region=eu-west-1"
    assert redact_uri("results/demo") == "results/demo"
    assert redact_uri("s3://b/p?endpoint_override=http://ak:pw@host:9000") == "s3://b/p?endpoint_override=http://***@host:9000"
    assert redact_uri("s3:ak:pw@bucket/p") == "s3:***@bucket/p"
    assert redact_uri("s3://b/p?key=abc&colour=blue") == "s3://b/p?key=***&colour=***"  # an unknown option may be a key


def test_free_text_hides_the_value_after_a_secret_named_key():
    assert redact_text('  api_key: "sk-1}\n aws_access_key_id = AKIA\n total_steps: 3') == "  api_key: ***}\n aws_access_key_id = ***\n total_steps: 3"
    assert redact_text('{"token": "t", "task_key": "hotel-1"} [s3://a:b@c/d') == '{"token": ***, "task_key": "hotel-1"} [s3://***@c/d'


def test_a_value_is_shown_by_its_key():
    assert shown_value("logging.api_key", "abc") == "***"
    assert shown_value("storage", "s3://u:p@bucket/x") == "s3://***@bucket/x"
    assert shown_value("env_variables", "API_TOKEN=ghp_abc, USER=alice") == "API_TOKEN=***, USER=alice"  # a mapping pasted as text
    assert shown_value("env_variables", 'API_TOKEN: Bearer ghp_abc, B="x y"') == "API_TOKEN: ***, B=\"x y\""  # an auth scheme's word
    assert shown_value("env_variables", 'API_TOKEN="abc def"; GITHUB_PAT=ghp_1') == "API_TOKEN=***; GITHUB_PAT=***"  # quoted whole
    assert shown_value("headers", "Authorization: Basic dXNlcjpw") == "Authorization: ***"
    assert shown_value("optim.lr", 0.001) == 0.001
    assert shown_value("logging.wandb", {"api_key": "x", "project": "p", "runs": [{"token": "t"}]}) == \
        {"api_key": "***", "project": "p", "runs": [{"token": "***"}]}


def test_a_message_shows_a_long_value_in_short():
    """A YAML alias bomb expands to millions of items: a message shows eight per list or section, four levels,
    300 characters, and builds no more than that (secrets hidden before anything is cut)."""
    from configkit.redact import shown_repr

    assert repr(shown_value("grid", list(range(20)))) == "[0, 1, 2, 3, 4, 5, 6, 7, … 12 more]"
    assert repr(shown_value("s", {str(i): i for i in range(10)})) == "{'0': 0, '1': 1, '2': 2, '3': 3, '4': 4, '5': 5, '6': 6, '7': 7, …: 2 more}"
    assert repr(shown_value("deep", [[[[[1]]]], {"a": {"b": {"c": {"d": 1}}}}])) == "[[[[[…]]]], {'a': {'b': {'c': {…}}}}]"
    assert shown_value("text", "x" * 400) == "x" * 300 + "… (400 characters)"
    assert shown_value("storage", "s3://u:p@b/" + "k" * 400).startswith("s3://***@b/kk")
    bomb: list = ["x"] * 9
    for _ in range(9):  # 9**10 items if expanded
        bomb = [bomb] * 9
    shown = shown_repr("trainer.seed", bomb)
    assert len(shown) == 301 and shown.startswith("[[[[[…], […], ") and shown.endswith("…")
    assert shown_repr("optim.lr", 0.001) == "0.001" and shown_repr("api_key", ["a"] * 50) == "'***'"


def test_dates_are_shown_as_yaml_wrote_them():
    """YAML 1.1 reads 2026-01-05 as a date: a message shows it so, as a value or a key, not as datetime.date(...)."""
    from configkit.base import parse_yaml
    from configkit.redact import shown_repr

    data = parse_yaml("a: 2026-01-05\nb: 2026-01-05 10:30:00\nc: 2026-01-05T10:30:00Z\nd: {2026-01-05: x}\n", "f.yaml")
    assert shown_repr("data", data) == "{'a': 2026-01-05, 'b': 2026-01-05 10:30:00, 'c': 2026-01-05 10:30:00Z, 'd': {2026-01-05: 'x'}}"


def test_a_secret_is_known_by_its_whole_path():
    """A list under a secret (``token[0]``), a key inside a secret's value, a secret named across a --set's key and
    its value's key (``aws_access: {key: ...}``): each hidden, and a message names such a key only up to the secret."""
    from configkit.redact import mentions_secret, shown_key

    assert looks_secret("env.backend.token[0]") and not looks_secret("env.env_keys[0]")
    assert shown_key("logging.wandb.api_key.sk12345") == "logging.wandb.api_key.…"
    assert shown_key("env.backend.token[0]") == "env.backend.token.…" and shown_key("optim.lr") == "optim.lr"
    assert mentions_secret("{key: 0777}", under="env.backend.aws_access") and not mentions_secret("{key: 0777}")
    assert shown_value("env.backend", {"aws_access": {"key": "AKIA999"}, "max_instances": 3}) == {"aws_access": {"key": "***"}, "max_instances": 3}
