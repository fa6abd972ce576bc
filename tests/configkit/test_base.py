"""configkit's YAML reader: a key given twice is refused with both places; what YAML allows on purpose is not."""

from __future__ import annotations

import pytest

from configkit.base import ConfigError, apply_overrides, get_dotted, parse_yaml, read_yaml


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("a: 1\nb: 2\na: 3\n", "src: key 'a' appears twice (lines 1 and 3)"),
        ("a:\n  b: 1\n  c: [{d: 1, d: 2}]\n", "src: key 'a.c[0].d' appears twice (line 3, columns 8 and 14)"),
        ("- {x: 1}\n- y: 1\n  y: 2\n", "src: key '[1].y' appears twice (lines 2 and 3)"),
        ("'a': 1\na: 2\n", "src: key 'a' appears twice"),  # quoted or not, the same key
    ],
)
def test_a_key_given_twice_is_named_with_both_places(text, named):
    with pytest.raises(ConfigError) as err:
        parse_yaml(text, "src")
    assert named in str(err.value)


def test_merges_aliases_and_look_alike_keys_are_not_repeats():
    text = "base: &b {lr: 1, seed: 2}\nrun:\n  <<: *b\n  lr: 3\nother: *b\n1: int\n'1': str\n"
    assert parse_yaml(text, "src") == {"base": {"lr": 1, "seed": 2}, "run": {"lr": 3, "seed": 2}, "other": {"lr": 1, "seed": 2}, 1: "int", "1": "str"}


@pytest.mark.parametrize(
    ("content", "named"),
    [
        (b"\xef\xbb\xbfname: t\n", None),  # a UTF-8 byte-order mark is fine
        (b"name: caf\xe9\n", "not UTF-8 text (byte 0xe9 at 9); save the YAML file as UTF-8"),
        (b"\xff\xfen\x00", "UTF-16 text"),
        (b"PK\x03\x04\x00\x00", "a binary file (NUL byte at 4), not a YAML file"),
        (b"a: [1,\n", 'space.yaml", line 2, column 1'),  # YAML's own message, its place in the file
        (b"", "empty (no keys, or only comments)"),
        (b"# a comment\n\n", "empty (no keys, or only comments)"),
    ],
)
def test_read_yaml_names_the_file_and_its_problem(tmp_path, content, named):
    path = tmp_path / "space.yaml"
    path.write_bytes(content)
    if named is None:
        assert read_yaml(path) == {"name": "t"}
        return
    with pytest.raises(ConfigError) as err:
        read_yaml(path)
    assert str(err.value).startswith(f"{path}: ") and named in str(err.value)


def test_exponent_floats_are_numbers():
    """PyYAML (YAML 1.1) reads ``1e-3`` as a string: a swept LR would reach Tune, logs and plots as text."""
    from configkit.base import parse_yaml

    data = parse_yaml("lr: {grid: [1e-3, 3E-4, 5e2, 1.0e-3, 2]}\nquoted: '1e-3'\nname: 1e3x\n", "space.yaml")
    assert data == {"lr": {"grid": [0.001, 0.0003, 500.0, 0.001, 2]}, "quoted": "1e-3", "name": "1e3x"}
    assert all(type(v) is float for v in data["lr"]["grid"][:4])


def test_strict_types_are_named_in_the_authors_words():
    """Configs coerce nothing: true is no number, 4.0 no whole number, 1 no true/false, a list no section."""
    from pydantic import ValidationError

    from configkit.base import StrictModel, describe_errors

    class Inner(StrictModel):
        lr: float = 0.1
        steps: int = 1
        on: bool = False
        name: str = "a"

    class Outer(StrictModel):
        inner: Inner = Inner()

    assert Outer.model_validate({"inner": {"lr": 3, "steps": 2}}).inner.lr == 3.0  # a whole number is a number
    cases = {
        "inner.lr": (True, "key 'inner.lr' = True: must be a number, not true/false"),
        "inner.steps": (4.0, "key 'inner.steps' = 4.0: must be a whole number: write 4, without the decimal point"),
        "inner.on": (1, "key 'inner.on' = 1: must be true or false, not a whole number"),
        "inner.name": (5, "key 'inner.name' = 5: must be text, not a whole number; quote it to keep the text as written "
                          "(unquoted, YAML reads 1.10 as the number 1.1 and 2026-01-05 as a date)"),
    }
    for key, (value, said) in cases.items():
        with pytest.raises(ValidationError) as caught:
            Outer.model_validate({"inner": {key.split(".")[1]: value}})
        assert describe_errors(caught.value, Outer, "f.yaml") == f"f.yaml: {said}"
    for text, hint in (("1e-3", " (write it without quotes)"), ("0.5", " (write it without quotes)"), ("abc", ""), ("010", ""),
                       ("1e-3 ", "")):  # only text that reads as a number without its quotes is told to drop them
        with pytest.raises(ValidationError) as caught:
            Outer.model_validate({"inner": {"lr": text}})
        assert describe_errors(caught.value, Outer, "f.yaml") == f"f.yaml: key 'inner.lr' = {text!r}: must be a number, not text{hint}"
    with pytest.raises(ValidationError) as caught:
        Outer.model_validate({"inner": [1]})
    assert describe_errors(caught.value, Outer, "f.yaml") == "f.yaml: key 'inner' = [1]: must be a mapping of keys (a section), not a list"


def test_yaml_11_readings_where_text_was_meant_are_explained():
    """``lr_schedule: off`` and ``name: no`` reach the model as False, an ``on:`` key as True, ``name: 1.10`` as 1.1 and
    ``name: 2026-01-05`` as a date (YAML 1.1): the error says so and how to quote; a true/false given for a number gets
    no such hint (nobody writes ``lr: on``)."""
    from typing import Literal

    from configkit.base import ConfigError, StrictModel, parse_yaml, validate

    class Inner(StrictModel):
        schedule: Literal["constant", "cosine"] = "constant"
        name: str = "a"
        lr: float = 0.1
        envs: dict[str, int] = {}

    class Outer(StrictModel):
        inner: Inner = Inner()

    def said(text: str) -> str:
        with pytest.raises(ConfigError) as caught:
            validate(Outer, parse_yaml(text, "f.yaml"), "f.yaml")
        return str(caught.value)

    quote = "YAML reads an unquoted yes, no, on or off as true/false: quote the word ('off') if you meant the text"
    reads = "quote it to keep the text as written (unquoted, YAML reads 1.10 as the number 1.1 and 2026-01-05 as a date)"
    assert said("inner: {schedule: off}") == f"f.yaml: key 'inner.schedule' = False: Input should be 'constant' or 'cosine'; {quote}"
    assert said("inner: {name: no}") == f"f.yaml: key 'inner.name' = False: must be text, not true/false; {quote}"
    assert said("inner: {on: 1}") == f"f.yaml: key True under 'inner' is true/false, not a name; {quote}"
    assert said("3: 1") == f"f.yaml: key 3 under '(top level)' is a whole number, not a name; {reads}"
    assert said("inner: {envs: {on: 1}}") == f"f.yaml: key True under 'inner.envs' is true/false, not a name; {quote}"  # a mapping field's
    assert said("inner: {envs: {hotel: 1, 2026-01-05: 2}}") == f"f.yaml: key 2026-01-05 under 'inner.envs' is a date, not a name; {reads}"
    assert said("inner: {envs: {2026-01-05 10:30:00: x}}").splitlines()[1] == (  # the value's error under the key as written
        "f.yaml: key 'inner.envs.2026-01-05 10:30:00' = 'x': must be a whole number, not text")
    assert said("inner: {envs: {'datetime.date(2026, 13, 1)': x}}") == (  # a quoted key that looks like pydantic's name is text
        "f.yaml: key 'inner.envs.datetime.date(2026, 13, 1)' = 'x': must be a whole number, not text")
    assert said("inner: {envs: {2026-01-05 10:30:00+02:00: x}}").splitlines()[1].startswith(
        "f.yaml: key 'inner.envs.2026-01-05 10:30:00+02:00' = 'x'")  # a zone too
    assert said("inner: {lr: on}") == "f.yaml: key 'inner.lr' = True: must be a number, not true/false"
    assert validate(Outer, parse_yaml("inner: {name: 'no'}", "f.yaml"), "f.yaml").inner.name == "no"
    # ``name: 1.10`` reaches the model as 1.1 and ``name: 2026-01-05`` as a date: quoted, the text is kept as written
    assert said("inner: {name: 1.10}") == f"f.yaml: key 'inner.name' = 1.1: must be text, not a number with a decimal point; {reads}"
    assert said("inner: {name: 2026-01-05}") == f"f.yaml: key 'inner.name' = 2026-01-05: must be text, not a date; {reads}"
    assert said("inner: {name: 2026-01-05 10:30:00}") == (
        f"f.yaml: key 'inner.name' = 2026-01-05 10:30:00: must be text, not a date and time; {reads}")
    assert said("inner: {name: [a]}") == "f.yaml: key 'inner.name' = ['a']: must be text, not a list"  # no quoting would help
    assert validate(Outer, parse_yaml("inner: {name: '2026-01-05'}", "f.yaml"), "f.yaml").inner.name == "2026-01-05"


def test_numbers_yaml_11_reads_otherwise_than_they_look_are_refused_by_key_and_line():
    """``010`` is octal 8 to YAML 1.1, ``1:30`` base-60 90: each refused with both readings, in a list and under a
    merge key too, and as a key, all at once; a secret's value is not shown, nor a key inside it, nor a value under a
    complex key (refused where YAML builds it); what
    YAML 1.1 reads as the text it looks like (``09``, ``0:30``, ``09:30``) and plain numbers read as before."""
    from configkit.base import ConfigError, UnreadableYaml, parse_yaml

    def said(text: str) -> str:
        with pytest.raises(ConfigError) as caught:
            parse_yaml(text, "f.yaml")
        return str(caught.value)

    assert said("seed: 010\nsteps: [4, 00]\nlimit: 1:30\n") == (
        "f.yaml: key 'seed' = 010 (line 1): a leading zero, which YAML 1.1 reads as octal (8): write 10 for the number, "
        "or quote it if it is text\n"
        "f.yaml: key 'steps[1]' = 00 (line 2): a leading zero, which YAML 1.1 reads as octal (0): write 0 for the number, "
        "or quote it if it is text\n"
        "f.yaml: key 'limit' = 1:30 (line 3): YAML 1.1 reads it in base 60 (90): quote it if it is text, or write the number you mean")
    assert "(-7): write -7 " in said("a: -007") and "(-90.5)" in said("a: -1:30.5") and "(30.5)" in said("a: 0:30.5")
    assert said("wandb: {api_key: 0123}") == "f.yaml: key 'wandb.api_key' = *** (line 1): a number YAML 1.1 reads otherwise than it looks (a leading zero: octal; a colon: base 60): quote it if it is text"
    assert said("x: {<<: {api_key: 0123}}") == "f.yaml: key 'x.api_key' = *** (line 1): a number YAML 1.1 reads otherwise than it looks (a leading zero: octal; a colon: base 60): quote it if it is text"
    assert "0123" not in said("x: {? [1]: {api_key: 0123}}") and "line 1" in said("010: x")  # keys: at their line, unshown
    assert said("010") == "f.yaml: 010: a leading zero, which YAML 1.1 reads as octal (8): write 10 for the number, or quote it if it is text"
    assert said("a:\n  b: {1:30: x}") == ("f.yaml: key 1:30 under 'a.b' (line 2): YAML 1.1 reads it in base 60 (90): quote it if it "
                                         "is text, or write the number you mean")  # a key, named with its mapping
    assert said("wandb: {api_key: {0123: x}}") == ("f.yaml: key *** under 'wandb.api_key' (line 1): a number YAML 1.1 reads otherwise "
                                                  "than it looks (a leading zero: octal; a colon: base 60): quote it if it is text")
    with pytest.raises(ConfigError) as caught:  # not "not valid YAML": a --set of a secret's section can say which key
        parse_yaml("{api_key: abc, 010: x}", "--set logging.wandb", under="logging.wandb")
    assert str(caught.value) == ("--set logging.wandb: key 010 under 'logging.wandb': a leading zero, which YAML 1.1 reads as octal (8): "
                                 "write 10 for the number, or quote it if it is text") and not isinstance(caught.value, UnreadableYaml)
    assert parse_yaml("a: [0, 10, 1_000, 0.05, '010', '1:30', 09, 0:30, 09:30, 0x1F]", "f.yaml") == {
        "a": [0, 10, 1000, 0.05, "010", "1:30", "09", "0:30", "09:30", 31]}


def test_a_set_values_problems_are_placed_in_its_value():
    """A --set's value is placed in itself, as typed (the key and '=' before it, a shown text cut or redacted, change
    nothing): "the value of KEY" in YAML's own errors, "of the value" in ours, no "line 1" for a one-line value;
    inside a secret's value no columns (they would measure it)."""
    from configkit.base import ConfigError, UnreadableYaml, parse_yaml

    def said(text: str, error: type[Exception] = ConfigError) -> str:
        with pytest.raises(error) as caught:
            parse_yaml(text, "--set", under="x.y")
        return str(caught.value)

    assert said("{a: 010}") == ("--set: key 'x.y.a' = 010: a leading zero, which YAML 1.1 reads as octal (8): write 10 for the number, "
                                "or quote it if it is text")
    assert said("{a: 1, a: 2}") == "--set: key 'x.y.a' appears twice (columns 2 and 8 of the value); the second would silently win: keep one"
    assert said("{a: 1,\n b: 010}").startswith("--set: key 'x.y.b' = 010 (line 2 of the value)")  # typed over lines: lines kept
    assert said("{a: 1, a: 2,\n b: 3}").startswith("--set: key 'x.y.a' appears twice (line 1, columns 2 and 8 of the value)")
    assert said("\n{a: 1, a: 2}").startswith("--set: key 'x.y.a' appears twice (line 2, columns 2 and 8 of the value)")
    assert said("{api_key: {a: 1, a: 2}}").startswith("--set: key 'x.y.api_key.…' appears twice; the second")
    assert said("[1,", UnreadableYaml).endswith('in "the value of x.y", line 1, column 4')  # one mark, placed once
    assert 'in "the value of x.y", line 1, column 1' in said("[1, 2", UnreadableYaml)


def test_a_tagged_unions_member_is_not_a_key_in_the_file():
    """Pydantic names the member in its locations (``env.backend.fleet.colour``): the error names the file's key
    and the chosen member's keys as the allowed ones."""
    from pydantic import ValidationError

    from configkit.base import describe_errors, user_loc
    from grpo.config import TrainerConfig
    from toolenvs.backend import FleetBackendConfig

    assert user_loc(TrainerConfig, ("env", "backend", "fleet", "ttl_s")) == (("env", "backend", "ttl_s"), FleetBackendConfig)
    assert user_loc(TrainerConfig, ("optim", "lr"))[0] == ("optim", "lr")
    with pytest.raises(ValidationError) as caught:
        TrainerConfig.model_validate({"env": {"backend": {"type": "fleet", "colour": 1}}})
    said = describe_errors(caught.value, TrainerConfig, "f")
    assert said.startswith("f: unknown key 'env.backend.colour' (allowed here: max_instances,") and "call_timeout_s" not in said


def test_dotted_keys_get_and_set_through_nested_sections():
    data = {"optim": {"lr": 1e-5, "sched": {"kind": "cosine"}}, "seed": 3, "lora": [1, 2]}
    assert get_dotted(data, "optim.sched.kind") == "cosine"
    assert get_dotted(data, ("optim", "lr")) == 1e-5
    assert get_dotted(data, "seed") == 3
    assert get_dotted(data, "optim.missing") is None
    assert get_dotted(data, "seed.deeper") is None  # a number is not a section
    assert get_dotted(data, "lora.0") is None  # nor is a list
    changed = apply_overrides(data, {"optim.sched.kind": "linear", "eval.every": 5, "seed": 4})
    assert changed == {"optim": {"lr": 1e-5, "sched": {"kind": "linear"}}, "seed": 4, "lora": [1, 2], "eval": {"every": 5}}
    assert data["optim"]["sched"]["kind"] == "cosine" and "eval" not in data  # the original is untouched
