"""The base policy for CPU runs: a tiny model warm-started on the tasks' reference solutions, cached.

Reference conversations are replayed in-process against the app's own tool functions (the same code the
MCP server runs), rendered with ``ChatFormat`` exactly as episodes are, and the model is trained with
cross-entropy on its own turns only. A short warm-start leaves a policy that solves some tasks and not
others, so GRPO has signal. The result is saved under the cache directory, keyed by everything it
depends on, and built once (a file lock keeps concurrent trials from building it twice).

The demo's and the learning space's base (one recipe) and the mix's ship in ``grpo/bases``, built here by this code. How well a
tiny model learns to copy ids and dates depends on float rounding, so another CPU's build of the same
recipe can come out worse (README: the base is fragile). Shipping them makes every machine start from the
base that README's numbers were measured on, and spares the 17 and 94 minutes (2 cores) of building them.

A mix of environments is shaped per env (``model.warmstart_envs``: each env's weight in the batches, its
generated task sets, its give-up share), so one base can hold the classes users see (an env it already
solves, one it has never seen, some between) from unedited task files. Set, they enter the recipe's hash;
unset, every recipe keeps its key and its build, draw for draw.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import random
import time
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from configkit import environ
from grpo.chat import ChatFormat, opening_messages
from grpo.config import ModelConfig, WarmstartEnvConfig
from grpo.schedule import lr_multiplier
from toolenvs.local import generated_tasks, get_app, tool_signatures
from toolenvs.protocol import DONE, ToolCall, format_call, format_result
from toolenvs.task import Task

log = logging.getLogger(__name__)
BUILD_VERSION = "5"  # bump when the tokenizer, the model or the warm-start recipe changes


@dataclass(frozen=True)
class Conversation:
    """A reference episode: the opening messages, then (model text, tool result or None) per turn."""

    messages: list[dict[str, str]]
    turns: list[tuple[str, str | None]]


def reference_conversation(task: Task) -> Conversation:
    """Replay a task's solution in-process and render it as the agent would have seen it."""
    app = get_app(task.env_key)
    calls = [(c.name, dict(sorted(c.arguments.items()))) for c in task.solution]  # one argument order, whatever the generator's
    _, _, results = app.replay(task.env_variables, task.initial_state, calls)
    messages = opening_messages(task.prompt, tool_signatures(app), task.env_variables)
    turns: list[tuple[str, str | None]] = [
        (format_call(ToolCall(name, args)), format_result(result)) for (name, args), result in zip(calls, results)
    ]
    turns.append((DONE, None))
    return Conversation(messages, turns)


def conversation_texts(conv: Conversation) -> list[str]:
    return [m["content"] for m in conv.messages] + [t for turn in conv.turns for t in turn if t]


def supervised_example(chat: ChatFormat, conv: Conversation) -> tuple[list[int], list[int]]:
    """Token ids of the whole reference episode and a mask that is 1 on the model's own tokens."""
    ids = chat.prompt_ids(conv.messages)
    mask = [0] * len(ids)
    for text, result in conv.turns:
        own = chat.assistant_ids(text)
        ids += own
        mask += [1] * len(own)
        if result is not None:
            tool = chat.tool_turn_ids(result)
            ids += tool
            mask += [0] * len(tool)
    return ids, mask


def _extra_vocabulary() -> list[str]:
    """Words an episode may show that no reference conversation contains: numbers, error messages."""
    numbers = [str(i) for i in range(100)] + [f"{i:02d}" for i in range(10)]
    days = [(date(2026, 1, 1) + timedelta(days=i)).isoformat() for i in range(366)]  # the task generators' range
    errors = (
        "Error executing tool error no action found unknown tool not valid JSON missing timed out past invalid "
        # the apps' error messages (toolenvs/local/*.py): words no reference conversation shows
        "permission denied not found already cannot must belongs collaborator collaborators closed sold left organizer "
        "own yourself yours bad empty too long high low value field request review reviewer seats status midnight hours"
    )
    return [" ".join(numbers + days), errors, "<|im_start|>tool\n<|im_start|>assistant\n<|im_start|>system\n<|im_start|>user\n"]


# What a base is built from, field by field, as BUILD_VERSION 5 hashed it: a field added to ModelConfig or
# Task later (a training option, a hosted task's extra key) is not part of the recipe unless added here, so
# it cannot silently orphan the shipped bases (grpo/bases) and force a 10-17 minute build.
RECIPE_MODEL_FIELDS = (
    "type", "name_or_path", "dtype", "rope_scaling", "hidden_size", "num_layers", "num_heads", "intermediate_size", "warmstart_steps",
    "warmstart_lr", "warmstart_batch_size", "warmstart_augment", "warmstart_give_up", "micro_batch_size", "activation_checkpointing",
    "cpu_offload",
)
RECIPE_TASK_FIELDS = (
    "task_key", "prompt", "env_key", "env_version", "env_variables", "initial_state", "verifier", "verifier_code", "solution", "modality",
    "difficulty",
)


def cache_key(cfg: ModelConfig, tasks: list[Task]) -> str:
    """The recipe's hash: the model and warm-start fields, the tasks it is warm-started on, its seed. The
    per-env settings enter only when set, so every recipe from before them keeps its key."""
    model = cfg.model_dump(include=set(RECIPE_MODEL_FIELDS))
    envs = {env: c.model_dump() for env, c in sorted(cfg.warmstart_envs.items()) if c != WarmstartEnvConfig()}
    if envs:
        model["warmstart_envs"] = envs
    payload = {
        "version": BUILD_VERSION,
        "model": model,
        "tasks": [t.model_dump(include=set(RECIPE_TASK_FIELDS)) for t in tasks],
        "seed": cfg.warmstart_seed,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def cache_root(cfg: ModelConfig) -> Path:
    return Path(cfg.cache_dir or environ.GRPO_SWEEP_CACHE.get() or Path.home() / ".cache" / "grpo-sweep")


SHIPPED = Path(__file__).parent / "bases"


def base_policy_path(cfg: ModelConfig, tasks: list[Task], announce: bool = True) -> Path:
    """The directory of the warm-started base policy (model + tokenizer): the shipped one when this recipe
    has one (and ``shipped_base``), else the cached build, building it if missing. ``announce``: say which
    shipped base is used (a rank other than the first, which said it, does not)."""
    shipped = shipped_base(cfg, tasks)
    if shipped is not None:
        if announce:
            log.info("using the shipped base policy %s (model.shipped_base: false builds it here)", shipped)
        return shipped
    root = cache_root(cfg)
    root.mkdir(parents=True, exist_ok=True)
    target = root / f"tiny-{cache_key(cfg, tasks)}"
    with open(root / f"{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / "warmstart.json").is_file():
            log.info("building the base policy in %s (%d warm-start steps, once)", target, cfg.warmstart_steps)
            _build(cfg, tasks, cfg.warmstart_seed, target)
    return target


def shipped_base(cfg: ModelConfig, tasks: list[Task]) -> Path | None:
    """The base that ships in ``grpo/bases`` for this recipe, when there is one and ``shipped_base`` is on."""
    path = SHIPPED / f"tiny-{cache_key(cfg, tasks)}"
    return path if cfg.shipped_base and (path / "warmstart.json").is_file() else None


def warmstart_env_problems(cfg: ModelConfig, tasks: list[Task]) -> list[str]:
    """What is wrong with ``model.warmstart_envs`` for these training tasks: an env it names that they lack, or
    every env's weight 0 (nothing to warm-start on)."""
    envs = sorted({t.env_key for t in tasks})
    problems = [f"key 'model.warmstart_envs.{env}': no training task has env_key {env!r} (they have: {', '.join(envs)})"
                for env in sorted(cfg.warmstart_envs) if env not in envs]
    if cfg.warmstart_envs and cfg.warmstart_steps > 0 and all(env_setting(cfg, env)[0] == 0 for env in envs):
        problems.append(f"key 'model.warmstart_envs': every env's weight is 0 ({', '.join(envs)}), so the warm-start has nothing to train on; "
                        "give one a weight above 0, or set model.warmstart_steps: 0")
    return problems


def env_setting(cfg: ModelConfig, env: str) -> tuple[float, int, float]:
    """(weight, augment, give_up) of one env: its ``warmstart_envs`` entry, the model-wide values where it has none."""
    own = cfg.warmstart_envs.get(env)
    if own is None:
        return 1.0, cfg.warmstart_augment, cfg.warmstart_give_up
    return (own.weight, cfg.warmstart_augment if own.augment is None else own.augment,
            cfg.warmstart_give_up if own.give_up is None else own.give_up)


def warmstart_tasks(cfg: ModelConfig, tasks: list[Task]) -> list[Task]:
    """The trial's tasks plus each env's augment (``warmstart_augment``, or its own) generated task sets (seeds 1, 2, ...)."""
    extra = [t for key in sorted({t.env_key for t in tasks}) for s in range(1, env_setting(cfg, key)[1] + 1) for t in generated_tasks(key, s)]
    return tasks + extra


def with_give_ups(conversations: list[Conversation], share: float, seed: int) -> list[Conversation]:
    """The conversations with ``round(share * n)`` of them, chosen by seed, replaced by one whose agent answers
    <done> at once, without acting."""
    chosen = set(random.Random(seed).sample(range(len(conversations)), round(share * len(conversations))))
    return [Conversation(c.messages, [(DONE, None)]) if i in chosen else c for i, c in enumerate(conversations)]


def with_env_give_ups(conversations: list[Conversation], envs: list[str], shares: dict[str, float], seed: int) -> list[Conversation]:
    """``with_give_ups`` env by env (``envs[i]``: conversation i's env; ``shares``: each env's give-up share), the
    envs in sorted order from one seeded RNG."""
    rng = random.Random(seed)
    chosen: set[int] = set()
    for env in sorted(set(envs)):
        members = [i for i, e in enumerate(envs) if e == env]
        chosen |= set(rng.sample(members, round(shares.get(env, 0.0) * len(members))))
    return [Conversation(c.messages, [(DONE, None)]) if i in chosen else c for i, c in enumerate(conversations)]


def _give_up_mix(cfg: ModelConfig, conversations: list[Conversation], envs: list[str], seed: int) -> list[Conversation] | None:
    """The second phase's conversations (some replaced by give-ups), or None when no env has give-ups."""
    if not any(c != WarmstartEnvConfig() for c in cfg.warmstart_envs.values()):  # every recipe from before the per-env settings, draw for draw
        return with_give_ups(conversations, cfg.warmstart_give_up, seed) if cfg.warmstart_give_up > 0 else None
    shares = {env: env_setting(cfg, env)[2] for env in set(envs)}
    return with_env_give_ups(conversations, envs, shares, seed) if any(shares.values()) else None


def _weights(cfg: ModelConfig, envs: list[str]) -> list[float] | None:
    """Each conversation's draw weight (its env's), or None when every env is alike (uniform draws)."""
    weights = [env_setting(cfg, env)[0] for env in envs]
    return None if all(w == 1.0 for w in weights) else weights


def _build(cfg: ModelConfig, tasks: list[Task], seed: int, target: Path) -> None:
    """Phase one: the reference conversations. Phase two, with ``warmstart_give_up``: an eighth as many steps at
    a sixth of the LR on the mix with give-ups, so the give-ups take none of the steps that copying ids and
    dates needs (on hotel: 2400, where 1200 left a policy that copies by luck)."""
    from grpo.policy import quiet_transformers
    from grpo.tiny import build_model, build_tokenizer

    quiet_transformers()
    problems = warmstart_env_problems(cfg, tasks)
    if problems:
        raise ValueError("; ".join(problems))
    replayed = warmstart_tasks(cfg, tasks)
    conversations = [reference_conversation(t) for t in replayed]
    envs = [t.env_key for t in replayed]
    weights = _weights(cfg, envs)
    corpus = [text for conv in conversations for text in conversation_texts(conv)] + _extra_vocabulary()
    tokenizer = build_tokenizer(corpus)
    chat = ChatFormat(tokenizer)
    model = build_model(tokenizer, cfg.hidden_size, cfg.num_layers, cfg.num_heads, cfg.intermediate_size, seed)
    examples = [supervised_example(chat, conv) for conv in conversations]
    stats = supervised_train(model, examples, chat.pad_id, cfg.warmstart_steps, cfg.warmstart_lr, cfg.warmstart_batch_size, seed, weights)
    give_ups = _give_up_mix(cfg, conversations, envs, seed)
    if give_ups is not None:
        mixed = [  # only the give-ups are tokenized again
            example if after is before else supervised_example(chat, after) for example, before, after in zip(examples, conversations, give_ups)
        ]
        steps, lr = max(1, cfg.warmstart_steps // 8), cfg.warmstart_lr / 6
        stats["give_up"] = supervised_train(model, mixed, chat.pad_id, steps, lr, cfg.warmstart_batch_size, seed, weights)
    tmp = target.with_name(target.name + ".tmp")
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "warmstart.json").write_text(json.dumps({**stats, "tasks": len(tasks), "vocab": len(tokenizer)}, indent=2))
    tmp.rename(target)


def warmstart_lr_multiplier(i: int, steps: int, warmup: int) -> float:
    """The warm-start's LR at its 0-based optimizer step ``i`` of ``steps``: ``grpo.schedule``'s cosine to a
    tenth, its last point one step past the end (the shipped bases were built with exactly these values)."""
    return lr_multiplier(i + 1, steps + 1, warmup, "cosine", 0.1)


def supervised_train(
    model, examples: list[tuple[list[int], list[int]]], pad_id: int, steps: int, lr: float, batch_size: int, seed: int,
    weights: list[float] | None = None,
) -> dict[str, Any]:
    """Cross-entropy on masked tokens, random mini-batches (drawn uniformly, or by ``weights``, one per example),
    a 5% linear warm-up then cosine decay to a tenth.

    Returns the first and last losses and the time; logs progress every tenth of the way.
    """
    import torch

    from grpo.batching import pad_right

    rng = random.Random(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    warmup = max(1, steps // 20)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: warmstart_lr_multiplier(i, steps, warmup))
    model.train()
    losses: list[float] = []
    started = time.perf_counter()
    for step in range(steps):
        if weights is None:
            batch = [examples[rng.randrange(len(examples))] for _ in range(batch_size)]
        else:
            batch = rng.choices(examples, weights=weights, k=batch_size)
        ids = pad_right([b[0] for b in batch], pad_id)
        mask = pad_right([b[1] for b in batch], 0)
        attention = pad_right([[1] * len(b[0]) for b in batch], 0)
        logits = model(input_ids=ids, attention_mask=attention).logits[:, :-1]
        token_loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
        target_mask = mask[:, 1:].float()
        loss = (token_loss * target_mask).sum() / target_mask.sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        if (step + 1) % max(1, steps // 10) == 0:
            log.info("warm-start step %d/%d loss %.3f (%.0fs)", step + 1, steps, losses[-1], time.perf_counter() - started)
    model.eval()
    return {
        "first_loss": losses[0] if losses else None,
        "last_loss": losses[-1] if losses else None,
        "seconds": time.perf_counter() - started,
    }


def main(argv: list[str] | None = None) -> None:
    """``python -m grpo.warmstart '<trainer config JSON>'``: build (or find) the base policy with every core."""
    import sys

    import torch

    from grpo.config import TrainerConfig
    from grpo.data import base_tasks
    from toolenvs.lifeline import exit_with_parent

    exit_with_parent(os.getppid())  # a driver killed mid-build takes the build (minutes, every core) with it
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    cfg = TrainerConfig.model_validate(json.loads((argv or sys.argv[1:])[0]))
    if cfg.model.name_or_path:  # a pretrained policy: nothing to warm-start
        print(cfg.model.name_or_path)
        return
    torch.set_num_threads(len(os.sched_getaffinity(0)) or 1)  # the cores it may use (taskset, a cgroup's cpuset)
    print(base_policy_path(cfg.model, base_tasks(cfg)))


if __name__ == "__main__":
    main()
