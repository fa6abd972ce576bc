"""The space grammar: one YAML distribution per dotted trainer key, optionally conditional on another key.

    optim.lr: {loguniform: [1.0e-5, 3.0e-3]}
    algorithm.clip_eps_high: {quniform: [0.2, 0.3, 0.02]}
    algorithm.kl_coef: {choice: [0.0, 0.01, 0.1]}
    algorithm.kl_estimator: {choice: [k1, k3], when: {algorithm.kl_coef: {gt: 0}}}
    rollout.n_samples_per_prompt: 4            # a fixed value

A conditional key is sampled only in trials where its ``when`` holds; elsewhere it keeps the base trainer's
value (it does not matter there, so a searcher should not spend trials on it). Pure data: no Ray, no Optuna.
"""

from __future__ import annotations

import math
import operator
from typing import Annotated, Any, Literal

from pydantic import Field, model_serializer, model_validator

from configkit.base import StrictModel
from configkit.redact import shown_repr

DISTRIBUTIONS = ("uniform", "loguniform", "quniform", "randint", "choice", "grid")
OPERATORS = {"gt": operator.gt, "ge": operator.ge, "lt": operator.lt, "le": operator.le, "eq": operator.eq, "ne": operator.ne}


class Condition(StrictModel):
    """One key's test, every given comparison must hold: ``{gt: 0}``, ``{ge: 1, le: 4}``, ``{in: [a, b]}``."""

    gt: Any = None
    ge: Any = None
    lt: Any = None
    le: Any = None
    eq: Any = None
    ne: Any = None
    in_: list[Any] | None = Field(None, alias="in")

    @model_validator(mode="before")
    @classmethod
    def _plain_value_means_eq(cls, data: Any) -> Any:
        return data if isinstance(data, dict) else {"eq": data}

    @model_validator(mode="after")
    def _not_empty(self) -> Condition:
        if not self.model_fields_set:
            raise ValueError(f"a condition needs one of {', '.join([*OPERATORS, 'in'])}")
        for name in ("gt", "ge", "lt", "le"):
            value = getattr(self, name)
            if name in self.model_fields_set and (isinstance(value, bool) or not isinstance(value, int | float) or value != value):
                raise ValueError(f"{name}: {value!r} is not a number; {name} compares numbers (eq, ne and in take other values)")
        return self

    @model_serializer(mode="plain")
    def _only_what_was_written(self) -> dict[str, Any]:
        """Dump as written (``{gt: 0}``), so a saved config reloads to the same condition."""
        return {("in" if name == "in_" else name): getattr(self, name) for name in self.model_fields_set}

    def holds(self, value: Any) -> bool:
        try:
            tests = [OPERATORS[name](value, getattr(self, name)) for name in OPERATORS if name in self.model_fields_set]
        except TypeError:  # a comparison between incomparable types (a string parent against a number) never holds
            return False
        if "in_" in self.model_fields_set:
            tests.append(value in (self.in_ or []))
        return all(tests)

    def describe(self) -> str:
        parts = [f"{name} {getattr(self, name)!r}" for name in OPERATORS if name in self.model_fields_set]
        return " and ".join(parts + ([f"in {self.in_!r}"] if "in_" in self.model_fields_set else []))


When = dict[str, Condition]


class _Sampled(StrictModel):
    when: When | None = Field(None, description="Sample this key only in trials where every condition holds.")

    def active(self, values: dict[str, Any]) -> bool:
        """Does ``when`` hold for a trial whose other swept keys have ``values``?"""
        return all(key in values and cond.holds(values[key]) for key, cond in (self.when or {}).items())


class Uniform(_Sampled):
    type: Literal["uniform"] = "uniform"
    low: float
    high: float

    def extremes(self) -> list[Any]:
        """The bounds and a value between them that is not round (an int-only key refuses it)."""
        return [self.low, self.high, self.low + (self.high - self.low) * 0.377]

    def contains(self, value: Any) -> bool:
        return isinstance(value, int | float) and self.low <= value <= self.high

    @model_validator(mode="after")
    def _ordered(self) -> Uniform:
        if not self.low < self.high:
            raise ValueError(f"low ({self.low}) must be below high ({self.high})")
        return self


class LogUniform(Uniform):
    type: Literal["loguniform"] = "loguniform"  # type: ignore[assignment]

    @model_validator(mode="after")
    def _positive(self) -> LogUniform:
        if self.low <= 0:
            raise ValueError(f"low ({self.low}) must be > 0 for a log scale")
        return self


class QUniform(Uniform):
    """Multiples of ``q`` from ``low`` to ``high`` (both included): ``{quniform: [0.2, 0.3, 0.02]}``."""

    type: Literal["quniform"] = "quniform"  # type: ignore[assignment]
    q: float = Field(gt=0)

    @property
    def whole(self) -> bool:
        """Bounds and step all whole numbers (``{quniform: [4, 16, 4]}``): its values are integers, sampled as such,
        so a whole-number key takes them (configs are strict: 8.0 is no whole number)."""
        return all(float(x).is_integer() for x in (self.low, self.high, self.q))

    def value(self, steps: int) -> Any:
        """The value ``steps`` steps of q above low (an int when ``whole``)."""
        value = self.low + self.q * steps
        return int(round(value)) if self.whole else value

    def extremes(self) -> list[Any]:
        high = int(self.high) if self.whole else self.high
        return [self.value(0), high, self.value(round((self.high - self.low) * 0.377 / self.q))]

    def contains(self, value: Any) -> bool:
        return super().contains(value) and _is_multiple(value - self.low, self.q)

    @model_validator(mode="after")
    def _whole_steps(self) -> QUniform:
        steps = (self.high - self.low) / self.q
        if not math.isfinite(steps) or steps > MAX_QUNIFORM_STEPS:
            raise ValueError(f"q ({self.q:g}) makes more than {MAX_QUNIFORM_STEPS:g} steps from low to high; use uniform or loguniform")
        if self.high > self.low and round(steps) < 1:
            raise ValueError(f"q ({self.q:g}) is larger than high - low ({self.high - self.low:g}): every trial would draw low; make q at most high - low")
        if not _is_multiple(self.high - self.low, self.q):
            raise ValueError(f"high - low ({self.high - self.low:g}) must be a whole number of steps q ({self.q:g})")
        return self


MAX_QUNIFORM_STEPS = 1e6  # more steps than any sweep draws: a q that small means uniform


def _is_multiple(span: float, q: float) -> bool:
    steps = span / q
    return math.isfinite(steps) and math.isclose(steps, round(steps), abs_tol=1e-6)


class RandInt(_Sampled):
    """Integers ``low <= x < high``."""

    type: Literal["randint"] = "randint"
    low: int
    high: int

    def extremes(self) -> list[Any]:
        return [self.low, self.high - 1]

    def contains(self, value: Any) -> bool:
        return isinstance(value, int) and self.low <= value < self.high

    @model_validator(mode="after")
    def _ordered(self) -> RandInt:
        if not self.low < self.high:
            raise ValueError(f"low ({self.low}) must be below high ({self.high}); high is exclusive")
        return self


class Choice(_Sampled):
    type: Literal["choice"] = "choice"
    values: list[Any] = Field(min_length=1)

    def extremes(self) -> list[Any]:
        return list(self.values)

    def contains(self, value: Any) -> bool:
        return value in self.values

    @model_validator(mode="after")
    def _each_once(self) -> Choice:
        """A value given twice is drawn twice as often by a choice and run twice by a grid: most likely a slip
        (``[1.0e-4, 1.0e-4]`` for ``[1.0e-4, 1.0e-5]``). The value is not shown (a secret's key may be swept)."""
        seen: dict[Any, int] = {}
        for i, value in enumerate(self.values):
            first = seen.setdefault(_same_as(value), i)
            if first != i:
                raise ValueError(f"items {first + 1} and {i + 1} are the same value; give each value once")
        return self


def _same_as(value: Any) -> Any:
    """What makes two of a choice's values one to the trainer, as a hashable form: a whole float is its int (0, 0.0
    and -0.0 are one number, as a float key and Optuna read them; big ints stay exact), true is no number, text is no
    number, a section's keys have no order, a list is its items."""
    if isinstance(value, bool) or value is None:
        return ("const", value)
    if isinstance(value, int):
        return ("number", value)
    if isinstance(value, float):
        return ("number", int(value)) if value.is_integer() else ("number", repr(value))  # nan and inf by their repr
    if isinstance(value, dict):
        return ("section", frozenset((_same_as(k), _same_as(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return ("list", tuple(_same_as(v) for v in value))
    return (type(value).__name__, repr(value))


class Grid(Choice):
    """Every value is tried (with the ``grid`` or ``random`` searcher)."""

    type: Literal["grid"] = "grid"  # type: ignore[assignment]


class Fixed(StrictModel):
    type: Literal["fixed"] = "fixed"
    value: Any
    when: None = None  # a fixed value has nothing to sample

    def extremes(self) -> list[Any]:
        return [self.value]

    def contains(self, value: Any) -> bool:
        return value == self.value

    def active(self, values: dict[str, Any]) -> bool:
        return True


Distribution = Annotated[Uniform | LogUniform | QUniform | RandInt | Choice | Grid | Fixed, Field(discriminator="type")]
NUMERIC = (Uniform, RandInt)  # QUniform and LogUniform are Uniforms


def distribution_dict(raw: Any) -> dict[str, Any]:
    """``{loguniform: [a, b], when: {...}}`` -> ``{type: loguniform, low: a, high: b, when: {...}}``; a scalar is fixed."""
    if not isinstance(raw, dict):
        return {"type": "fixed", "value": raw}
    if "type" in raw:
        return raw
    names = [k for k in raw if k != "when"]
    if len(names) != 1 or names[0] not in DISTRIBUTIONS:
        raise ValueError(f"a distribution is one of {{{', '.join(DISTRIBUTIONS)}}}: [...] (with an optional when: {{...}}) or a plain value, got {shown_repr('', raw)}")
    name, args = names[0], raw[names[0]]
    extra = {"when": raw["when"]} if "when" in raw else {}
    if name in ("choice", "grid"):
        return {"type": name, "values": args, **extra}
    arity = 3 if name == "quniform" else 2
    if not isinstance(args, list) or len(args) != arity:
        raise ValueError(f"{name} takes [low, high{', q' if arity == 3 else ''}], got {shown_repr('', args)}")
    return {"type": name, "low": args[0], "high": args[1], **({"q": args[2]} if arity == 3 else {}), **extra}
