"""A hand-made sweep directory with known numbers, laid out as a real sweep writes it (Tune trial folders
with result.json/params.json, leaderboard.json, trajectories/{trial}/..., optuna.db), so the report's
statuses and diagnoses can be checked against numbers worked by hand."""

from __future__ import annotations

import json
from pathlib import Path

ENVS = ("hotel", "mail", "github", "zillow")
# per trial: lr, kl_coef, eval pass@1 per env at global steps 0..3, and per-step training curves (steps 1..3)
TRIALS = {
    "aaaa0001": {  # the winner: hotel IMPROVED, mail SATURATED at step 0, github FAILING, zillow FLAT
        "config": {"optim.lr": 1e-3, "algorithm.kl_coef": 0.01},
        "eval": {"hotel": [0.2, 0.3, 0.5, 0.45], "mail": [0.95, 0.95, 1.0, 1.0], "github": [0.0, 0.0, 0.0, 0.0], "zillow": [0.3, 0.32, 0.31, 0.3]},
        "variance": [0.1, 0.08, 0.06], "clip": [0.05, 0.04, 0.05], "kl": [0.001, 0.002, 0.003], "status": "finished", "wall": 30.0,
    },
    "bbbb0002": {  # flat with clip fraction ~0: LR too low
        "config": {"optim.lr": 1e-6, "algorithm.kl_coef": 0.0},
        "eval": {"hotel": [0.2, 0.2, 0.21, 0.2], "mail": [0.95] * 4, "github": [0.0] * 4, "zillow": [0.3] * 4},
        "variance": [0.1, 0.1, 0.1], "clip": [0.0, 0.0, 1e-4], "kl": [0.0, 0.0, 0.0], "status": "finished", "wall": 31.0,
    },
    "cccc0003": {  # KL rising while pass@1 falls; clip high
        "config": {"optim.lr": 3e-2, "algorithm.kl_coef": 0.0},
        "eval": {"hotel": [0.2, 0.1, 0.05], "mail": [0.95, 0.7, 0.5], "github": [0.0] * 3, "zillow": [0.3, 0.2, 0.1]},
        "variance": [0.1, 0.05], "clip": [0.3, 0.4], "kl": [0.01, 0.2], "status": "stopped early", "wall": 20.0,
    },
    "dddd0004": {  # no signal at all, stopped by the zero-signal rule
        "config": {"optim.lr": 1e-4, "algorithm.kl_coef": 0.1},
        "eval": {"hotel": [0.0, 0.0, 0.0], "mail": [0.0] * 3, "github": [0.0] * 3, "zillow": [0.0] * 3},
        "variance": [0.0, 0.0], "clip": [0.0, 0.0], "kl": [0.0, 0.0], "status": "zero signal", "wall": 15.0,
    },
}
SPACE = {  # as sweep_config.json saves it
    "optim.lr": {"type": "loguniform", "low": 1e-6, "high": 1e-1, "when": None},
    "algorithm.kl_coef": {"type": "uniform", "low": 0.0, "high": 0.1, "when": None},
}
EPISODES = [  # (score, stop_reason, output_response)
    (1.0, "done", '<tool_call>{"name": "book_hotel", "arguments": {"hotel_id": "H01"}}</tool_call><|im_end|>\n<|im_start|>tool\nbooked B1<|im_end|>\n<|im_start|>assistant\n<done><|im_end|>'),
    (0.0, "done", "<done><|im_end|>"),
    (0.0, "max_turns", '<tool_call>{"name": "cancel_booking", "arguments": {"booking_id": "B9"}}</tool_call><|im_end|>\n<|im_start|>tool\npermission denied: booking B9 belongs to another guest<|im_end|>\n<|im_start|>assistant\n<tool_call>{"name": "cancel_booking", "arguments": {"booking_id": "B9"}}</tool_call><|im_end|>'),
    (0.0, "max_turns", '<tool_call>{"name": "book_hotel", "arguments": {"hotel_id": "H99"}}</tool_call><|im_end|>\n<|im_start|>tool\nhotel H99 not found<|im_end|>\n<|im_start|>assistant\nbook<|im_end|>\n<|im_start|>tool\nerror: no action found; answer with <tool_call>{"name": ..., "arguments": {...}}</tool_call> or <done><|im_end|>'),
    (0.0, "max_input_length", '<tool_call>{"name": "book_hotel", "arguments": {"nights": 99}}</tool_call><|im_end|>\n<|im_start|>tool\nbad arguments for book_hotel: nights must be 1 to 14<|im_end|>'),
]

FAILURES = [  # per episode, its failed turns as the trainer dumps them: (kind, what the agent was shown)
    [],
    [],
    [("permission_denied", "permission denied: booking B9 belongs to another guest"),
     ("repeated_call", '{"name": "cancel_booking", "arguments": {"booking_id": "B9"}}')],
    [("not_found", "hotel H99 not found"), ("malformed_call", 'error: no action found; answer with <tool_call>{"name": ..., "arguments": {...}}</tool_call> or <done>')],
    [("invalid_argument", "bad arguments for book_hotel: nights must be 1 to 14")],
]


def _result_rows(trial_id: str, spec: dict) -> list[dict]:
    rows, total = [], 0.0
    evals = list(zip(*spec["eval"].values()))
    for i, (variance, clip, kl) in enumerate(zip(spec["variance"], spec["clip"], spec["kl"]), start=1):
        total += spec["wall"] / len(spec["variance"])
        row = {"reward/avg_pass_at_1": 0.5, "reward/variance_per_prompt": variance, "policy/clip_frac": clip, "policy/kl": kl,
               "policy/entropy": 2.0, "rollout/tool_error_rate": 0.2, "step": i, "training_iteration": i, "trial_id": trial_id,
               "time_total_s": total, "config": spec["config"]}
        row.update({f"reward/{env}/pass_at_1": 0.5 for env in ENVS})
        row.update({f"reward/{env}/variance_per_prompt": (variance if env != "github" else 0.0) for env in ENVS})
        row.update({f"eval/{env}/pass_at_1": p for env, p in zip(ENVS, evals[i])})
        row.update({"eval/avg_pass_at_1": sum(evals[i]) / len(ENVS), "eval/global_step": float(i)})
        rows.append(row)
    return rows


def _write_trial(root: Path, trial_id: str, spec: dict) -> None:
    folder = root / f"run_trial_{trial_id}_1_lr={spec['config']['optim.lr']}_2026-11-22_10-00-00"
    folder.mkdir(parents=True)
    (folder / "params.json").write_text(json.dumps(spec["config"]))
    (folder / "result.json").write_text("".join(json.dumps(r) + "\n" for r in _result_rows(trial_id, spec)))
    traj = root / "trajectories" / trial_id
    traj.mkdir(parents=True)
    (traj / "trainer_config.json").write_text(json.dumps({"total_steps": 3}))
    with open(traj / "aggregated_results.jsonl", "w") as f:
        for step, values in enumerate(zip(*spec["eval"].values())):
            f.write(json.dumps({"global_step": step, **{f"eval/{e}/pass_at_1": v for e, v in zip(ENVS, values)}, "eval/avg_pass_at_1": sum(values) / 4}) + "\n")
    step_dir = traj / "global_step_0"
    step_dir.mkdir()
    with open(step_dir / "hotel.jsonl", "w") as f:
        for i, (score, stop, response) in enumerate(EPISODES):
            extras = {"task_key": f"hotel-{i}", "env_key": "hotel", "turns": response.count("<|im_end|>"), "tool_calls": response.count("<tool_call>{"),
                      "env_error": "", "failures": [{"kind": kind, "turn": turn, "text": text} for turn, (kind, text) in enumerate(FAILURES[i])]}
            f.write(json.dumps({"input_prompt": "p", "output_response": response, "score": score, "stop_reason": stop, "env_extras": extras}) + "\n")


def _write_study(root: Path) -> None:
    """An Optuna study like the sweep's: the 2 finished trials COMPLETE, the stopped ones PRUNED, plus 2 more."""
    import optuna
    from optuna.distributions import CategoricalDistribution, FloatDistribution

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name=root.name, storage=f"sqlite:///{root / 'optuna.db'}", direction="maximize")
    dists = {"optim.lr": FloatDistribution(1e-6, 1e-1, log=True), "algorithm.kl_coef": CategoricalDistribution([0.0, 0.01, 0.1])}
    finished = [(1e-3, 0.01, 0.69), (1e-6, 0.0, 0.34), (3e-4, 0.1, 0.6), (1e-5, 0.01, 0.36)]
    for lr, kl, value in finished:
        study.add_trial(optuna.trial.create_trial(params={"optim.lr": lr, "algorithm.kl_coef": kl}, distributions=dists, value=value))
    for lr, kl in [(3e-2, 0.0), (1e-4, 0.1)]:
        study.add_trial(optuna.trial.create_trial(params={"optim.lr": lr, "algorithm.kl_coef": kl}, distributions=dists,
                                                  state=optuna.trial.TrialState.PRUNED, intermediate_values={2: 0.1}))


def make_sweep_dir(root: Path, study: bool = True) -> Path:
    """Write the fixture sweep under ``root`` (a directory named like the sweep) and return it."""
    root.mkdir(parents=True, exist_ok=True)
    for trial_id, spec in TRIALS.items():
        _write_trial(root, trial_id, spec)
    board = [{"trial": t, "config": s["config"], "status": s["status"], "steps": len(s["variance"])} for t, s in TRIALS.items()]
    (root / "leaderboard.json").write_text(json.dumps(board))
    (root / "sweep_config.json").write_text(json.dumps({"name": root.name, "scheduler": {"type": "asha"}, "space": SPACE}))
    if study:
        _write_study(root)
    return root
