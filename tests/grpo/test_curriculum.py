"""The curriculum: its math by hand (per task and per env), its sampler's weights following the estimates, its state and its probe file."""

from __future__ import annotations

import json
import random
from types import SimpleNamespace

import pytest

from configkit.base import ConfigError
from grpo.config import TrainerConfig
from grpo.curriculum import (
    CurriculumSampler,
    CurriculumSettings,
    draw_probabilities,
    env_results,
    learnability,
    learning_potential,
    mean_by_env,
    read_probe,
    signal_probability,
    spread_over_envs,
    starting_env_counts,
    task_results,
    updated_counts,
    weighted_sample,
    write_probe,
)
from grpo.data import TaskSampler, make_sampler


def _episode(task_key: str, reward: float, env_error: bool = False) -> SimpleNamespace:
    return SimpleNamespace(task_key=task_key, reward=reward, env_error=env_error)


def test_learning_potentials_by_hand():
    assert signal_probability(0.5, 4) == pytest.approx(1 - 1 / 16 - 1 / 16)  # 0.875
    assert signal_probability(0.25, 2) == pytest.approx(1 - 0.0625 - 0.5625)  # 0.375: one pass and one fail in two
    assert signal_probability(0.0, 8) == 0.0 and signal_probability(1.0, 8) == 0.0
    assert learnability(0.25, 99) == pytest.approx(0.1875)
    assert learning_potential("signal") is signal_probability
    with pytest.raises(ValueError, match="valid: signal, learnability"):
        learning_potential("entropy")


def test_draw_probabilities_mix_the_weights_with_an_even_floor():
    probs = draw_probabilities([0.5, 0.0, 0.25], floor=0.1)
    # 0.9 * w / 0.75 + 0.1 / 3
    assert probs == pytest.approx([0.6 + 1 / 30, 1 / 30, 0.3 + 1 / 30])
    assert sum(probs) == pytest.approx(1.0)
    assert draw_probabilities([0.0, 0.0], floor=0.0) == [0.5, 0.5]  # nothing has potential: uniform
    assert draw_probabilities([3.0, 1.0], floor=1.0) == [0.5, 0.5]


def test_counts_decay_then_add():
    assert updated_counts(3.0, 1.0, 2, 2, 0.5) == (3.5, 2.5)
    assert updated_counts(3.0, 1.0, 0, 4, 1.0) == (3.0, 5.0)


def test_weighted_sample_is_seeded_distinct_within_a_run_and_follows_the_weights():
    probs = [0.7, 0.2, 0.1, 0.0]
    assert weighted_sample(random.Random(3), probs, 3) == weighted_sample(random.Random(3), probs, 3)
    assert len(set(weighted_sample(random.Random(1), probs, 4))) == 4  # without replacement within a run
    assert weighted_sample(random.Random(1), probs, 4)[-1] == 3  # probability 0 comes last
    long = weighted_sample(random.Random(1), probs, 9)  # past the tasks: runs start over
    assert sorted(long[:4]) == [0, 1, 2, 3] and sorted(long[4:8]) == [0, 1, 2, 3]
    rng = random.Random(0)
    firsts = [weighted_sample(rng, probs, 1)[0] for _ in range(20000)]
    for index, want in enumerate(probs):  # the first draw of a run follows the probabilities exactly
        assert firsts.count(index) / len(firsts) == pytest.approx(want, abs=0.015)


def test_task_results_count_passes_and_fails_and_skip_env_errors():
    got = task_results([_episode("a", 1.0), _episode("a", 0.0), _episode("a", 0.4), _episode("b", 1.0, env_error=True), _episode("c", 0.5)])
    assert got == {"a": (1, 2), "c": (1, 0)}


def _sampler(tasks, floor=0.1, decay=0.8, prior=None, seed=0):
    return CurriculumSampler(tasks, seed, CurriculumSettings("signal", floor, decay, 4), prior)


def test_saturated_tasks_fade_and_come_back_when_their_estimate_moves(tasks):
    three = tasks[:3]
    sampler = _sampler(three)
    assert sampler.probabilities() == pytest.approx([1 / 3] * 3)  # every task starts at one pass, one fail
    solved = three[0].task_key
    for _ in range(5):
        sampler.observe([_episode(solved, 1.0)] * 4 + [_episode(three[1].task_key, r) for r in (1.0, 0.0, 0.0, 1.0)])
    a, b = sampler.counts[solved]
    # one observation: (1 * 0.8 + 4, 1 * 0.8) = (4.8, 0.8); five: b = 0.8^5
    assert b == pytest.approx(0.8**5) and a == pytest.approx(0.8**5 + 4 * (1 + 0.8 + 0.8**2 + 0.8**3 + 0.8**4))
    faded = sampler.probabilities()
    assert faded[0] < 0.1 < 0.4 < faded[1] and faded[0] >= 0.1 / 3  # fades, down to no less than the floor's share
    for _ in range(3):
        sampler.observe([_episode(solved, r) for r in (1.0, 0.0, 1.0, 0.0)])
    assert sampler.probabilities()[0] > 3 * faded[0]  # the policy forgot it: it is drawn again


def test_curriculum_state_round_trips_through_json_and_continues_exactly(tasks):
    sampler = _sampler(tasks[:20], seed=7)
    batch = sampler.next_batch(5)
    sampler.observe([_episode(t.task_key, float(i % 2)) for i, t in enumerate(batch * 2)])
    saved = json.loads(json.dumps(sampler.state()))
    want = [[t.task_key for t in sampler.next_batch(4)] for _ in range(3)]
    fresh = _sampler(tasks[:20], seed=99)
    fresh.restore(saved)
    assert [[t.task_key for t in fresh.next_batch(4)] for _ in range(3)] == want
    assert fresh.counts == sampler.counts
    with pytest.raises(ValueError, match="plain one"):
        fresh.restore(TaskSampler(tasks[:20], 0).state())


def test_metrics_report_each_envs_share_and_the_expected_signal(tasks):
    sampler = _sampler(tasks[:4], floor=0.0)
    metrics = sampler.metrics()
    assert metrics["curriculum/hotel/weight"] == pytest.approx(1.0)
    assert metrics["curriculum/expected_signal"] == pytest.approx(signal_probability(0.5, 4))
    assert metrics["curriculum/mean_pass_rate"] == pytest.approx(0.5)


def test_a_probe_file_seeds_the_estimates(tasks, tmp_path):
    probe = [SimpleNamespace(task_key=tasks[0].task_key, env_key="hotel", successes=8, samples=8),
             SimpleNamespace(task_key=tasks[1].task_key, env_key="hotel", successes=3, samples=8)]
    path = write_probe(tmp_path / "probe.json", probe, 8)
    assert read_probe(path) == {tasks[0].task_key: (8, 0), tasks[1].task_key: (3, 5)}
    cfg = TrainerConfig.model_validate({"data": {"curriculum": {"enabled": True, "prior_path": str(path)}}})
    sampler = make_sampler(cfg, tasks[:3])
    assert isinstance(sampler, CurriculumSampler)
    assert sampler.counts[tasks[0].task_key] == [9.0, 1.0] and sampler.counts[tasks[1].task_key] == [4.0, 6.0]
    assert sampler.counts[tasks[2].task_key] == [1.0, 1.0]  # not probed
    with pytest.raises(ConfigError, match="none of its 2 tasks is a training task"):
        make_sampler(cfg, tasks[5:8])
    (tmp_path / "bad.json").write_text('{"tasks": []}')
    bad = cfg.model_copy(update={"data": cfg.data.model_copy(update={"curriculum": cfg.data.curriculum.model_copy(update={"prior_path": str(tmp_path / "bad.json")})})})
    with pytest.raises(ConfigError, match="data.curriculum.prior_path.*not a probe file.*--save-probe"):
        make_sampler(bad, tasks[:3])
    assert isinstance(make_sampler(TrainerConfig(), tasks[:3]), TaskSampler)  # off by default


def test_fewer_pseudo_counts_let_the_probe_speak_by_hand(tasks):
    """The mix's case: tasks the base solved 8 of 8 or 0 of 8 times look, under one pseudo-pass and one pseudo-fail,
    more than half as likely to give signal as a task at 4 of 8; with 0.1 of each they fade."""
    three = tasks[:3]
    probe = {three[0].task_key: (8, 0), three[1].task_key: (0, 8), three[2].task_key: (4, 4)}

    def sampler(pseudo):
        return CurriculumSampler(three, 0, CurriculumSettings("signal", 0.0, 0.8, 8, prior_counts=pseudo), probe)

    one, tenth = sampler(1.0), sampler(0.1)
    assert one.counts[three[0].task_key] == [9.0, 1.0] and tenth.counts[three[0].task_key] == pytest.approx([8.1, 0.1])
    # n = 8. One each: p = 0.9 and 0.1, potential 1 - 0.9^8 - 0.1^8 = 0.5695328; p = 0.5: 1 - 2 / 256 = 0.9921875.
    # Floor 0: the 4-of-8 task's share 0.9921875 / (2 * 0.5695328 + 0.9921875) = 0.465542
    assert one.probabilities()[2] == pytest.approx(0.465542, abs=1e-6)
    # 0.1 each: p = 8.1 / 8.2 = 0.9878049, 0.9878049^8 = 0.9065032 (0.0121951^8 < 1e-15): potential 0.0934968;
    # the 4-of-8 task (p = 4.1 / 8.2 = 0.5, potential 0.9921875): 0.9921875 / (2 * 0.0934968 + 0.9921875) = 0.841421
    assert tenth.probabilities()[2] == pytest.approx(0.841421, abs=1e-6)
    assert tenth.probabilities()[0] == pytest.approx(tenth.probabilities()[1]) == pytest.approx(0.0934968 / 1.1791811, abs=1e-6)
    # without a probe every task starts at 0.5 whatever the pseudo-counts; one observation moves fewer counts further
    bare = CurriculumSampler(three, 0, CurriculumSettings("signal", 0.0, 0.8, 8, prior_counts=0.1))
    assert bare.pass_rates() == [0.5, 0.5, 0.5]
    # the envs start at the same pseudo-counts, plus their tasks' probe counts (a: 0.1 + 8 + 3, 0.1 + 0 + 5)
    envs = starting_env_counts({"a1": "a", "a2": "a", "b1": "b"}, {"a1": (8, 0), "a2": (3, 5)}, 0.1)
    assert envs["a"] == pytest.approx([11.1, 5.1]) and envs["b"] == pytest.approx([0.1, 0.1])
    cfg = TrainerConfig.model_validate({"data": {"curriculum": {"enabled": True, "prior_counts": 0.1}}})
    assert CurriculumSettings.of(cfg).prior_counts == 0.1 and TrainerConfig().data.curriculum.prior_counts == 1.0


def test_curriculum_config_is_bounded():
    from pydantic import ValidationError

    for bad in ({"floor": 1.5}, {"decay": 0.0}, {"weight": "entropy"}, {"extra": 1}, {"prior_counts": 0.0}):
        with pytest.raises(ValidationError):
            TrainerConfig.model_validate({"data": {"curriculum": bad}})


def _in_envs(tasks, envs):
    """Copies of ``tasks`` whose env_key is ``envs[i % len(envs)]`` (the task file has one env)."""
    return [t.model_copy(update={"env_key": envs[i % len(envs)]}) for i, t in enumerate(tasks)]


def _env_sampler(tasks, level, floor=0.125, decay=0.5, n=2, prior=None, seed=0):
    return CurriculumSampler(tasks, seed, CurriculumSettings("signal", floor, decay, n, level), prior)


def test_env_math_by_hand():
    env_of = {"a1": "a", "a2": "a", "b1": "b"}
    assert env_results({"a1": (1, 1), "a2": (2, 0), "b1": (0, 3), "elsewhere": (5, 5)}, env_of) == {"a": (3, 1), "b": (0, 3)}
    # one pass and one fail each, plus the probe's counts of the env's tasks: a = 1 + 8 + 3, 1 + 0 + 5
    assert starting_env_counts(env_of, {"a1": (8, 0), "a2": (3, 5), "elsewhere": (9, 9)}, 1.0) == {"a": [12.0, 6.0], "b": [1.0, 1.0]}
    envs = ["a", "a", "b"]
    assert spread_over_envs(envs, {"a": 0.6, "b": 0.4}, [1.0, 1.0, 1.0]) == pytest.approx([0.3, 0.3, 0.4])  # evenly within an env
    assert spread_over_envs(envs, {"a": 0.6, "b": 0.4}, [3.0, 1.0, 0.5]) == pytest.approx([0.45, 0.15, 0.4])  # 0.6 * 3/4, 0.6 * 1/4
    assert spread_over_envs(envs, {"a": 0.6, "b": 0.4}, [0.0, 0.0, 1.0]) == pytest.approx([0.3, 0.3, 0.4])  # no weight in a: evenly
    with pytest.raises(ValueError, match="valid: task, env, both"):
        CurriculumSettings("signal", 0.1, 0.8, 4, "global")


def test_env_and_both_levels_draw_by_hand(tasks):
    three = a1, a2, b1 = _in_envs(tasks[:3], ["a", "a", "b"])
    env = _env_sampler(three, "env")
    assert env.env_counts == {"a": [1.0, 1.0], "b": [1.0, 1.0]}
    env.env_counts = {"a": [1.0, 1.0], "b": [3.0, 1.0]}
    # n = 2: potential 1 - p^2 - (1-p)^2 = 2p(1-p); a: p = 0.5 -> 0.5, b: p = 0.75 -> 0.375; sum 0.875.
    # shares (1 - 0.125) * w / 0.875 + 0.125 / 2 = w + 1/16: a 0.5625, b 0.4375; a's two tasks split a's evenly
    assert env.env_shares() == pytest.approx({"a": 0.5625, "b": 0.4375})
    assert env.probabilities() == pytest.approx([0.28125, 0.28125, 0.4375])
    metrics = env.metrics()
    assert metrics["curriculum/a/weight"] == pytest.approx(0.5625) and metrics["curriculum/b/weight"] == pytest.approx(0.4375)
    assert metrics["curriculum/a/pass_rate"] == 0.5 and metrics["curriculum/b/pass_rate"] == 0.75

    both = _env_sampler(three, "both")
    both.env_counts = {"a": [1.0, 1.0], "b": [3.0, 1.0]}
    both.counts = {a1.task_key: [1.0, 1.0], a2.task_key: [3.0, 1.0], b1.task_key: [1.0, 3.0]}
    # tasks: potentials 0.5, 0.375, 0.375 (p = 0.5, 0.75, 0.25); sum 1.25; 0.875 * w / 1.25 + 0.125 / 3 = 0.7 w + 1/24:
    # a1 94/240, a2 73/240, b1 73/240. Within a: 94/167 and 73/167 of a's 9/16; b1 has all of b's 7/16
    assert both.probabilities() == pytest.approx([9 / 16 * 94 / 167, 9 / 16 * 73 / 167, 7 / 16])
    assert sum(both.probabilities()) == pytest.approx(1.0)


def test_env_potential_from_the_tasks_by_hand(tasks):
    assert mean_by_env(["a", "b", "a"], [0.5, 0.2, 0.25]) == {"a": 0.375, "b": 0.2}
    three = a1, a2, b1 = _in_envs(tasks[:3], ["a", "a", "b"])
    env = CurriculumSampler(three, 0, CurriculumSettings("signal", 0.125, 0.5, 2, "env", "tasks"))
    env.counts = {a1.task_key: [1.0, 1.0], a2.task_key: [3.0, 1.0], b1.task_key: [1.0, 3.0]}
    # n = 2: task potentials 2p(1-p) = 0.5, 0.375, 0.375; a's mean 0.4375, b's 0.375; sum 0.8125.
    # shares 0.875 * w / 0.8125 + 1/16 = 14/13 w + 1/16: a 111/208, b 97/208 (env_counts are not read)
    assert env.env_potentials() == pytest.approx({"a": 0.4375, "b": 0.375})
    assert env.env_shares() == pytest.approx({"a": 111 / 208, "b": 97 / 208})
    assert env.probabilities() == pytest.approx([111 / 416, 111 / 416, 97 / 208])


def test_an_env_solved_always_or_never_weighs_little_by_its_tasks_and_much_pooled(tasks):
    """The mix's zillow: one-call tasks solved, longer ones never; its pooled pass rate is near 0.5."""
    four = _in_envs(tasks[:4], ["bimodal", "mixed"])  # bimodal: tasks 0 and 2, mixed: 1 and 3
    counts = dict(zip([t.task_key for t in four], [[9.0, 1.0], [1.0, 1.0], [1.0, 9.0], [1.0, 1.0]]))
    shares = {}
    for how in ("pooled", "tasks"):
        sampler = CurriculumSampler(four, 0, CurriculumSettings("signal", 0.0, 0.5, 2, "env", how))
        sampler.counts = dict(counts)
        sampler.env_counts = {"bimodal": [10.0, 10.0], "mixed": [2.0, 2.0]}  # both pooled at p = 0.5
        shares[how] = sampler.env_shares()
    assert shares["pooled"] == pytest.approx({"bimodal": 0.5, "mixed": 0.5})
    # tasks: bimodal 2 * 0.9 * 0.1 = 0.18 (both tasks), mixed 0.5: 0.18 / 0.68 and 0.5 / 0.68
    assert shares["tasks"] == pytest.approx({"bimodal": 0.18 / 0.68, "mixed": 0.5 / 0.68})
    with pytest.raises(ValueError, match="valid: pooled, tasks"):
        CurriculumSettings("signal", 0.1, 0.8, 4, "env", "median")
    cfg = TrainerConfig.model_validate({"data": {"curriculum": {"enabled": True, "level": "env", "env_potential": "tasks"}}})
    assert CurriculumSettings.of(cfg).env_potential == "tasks" and TrainerConfig().data.curriculum.env_potential == "pooled"


def test_env_counts_decay_when_the_env_is_rolled_out(tasks):
    a1, a2, b1 = _in_envs(tasks[:3], ["a", "a", "b"])
    sampler = _env_sampler([a1, a2, b1], "env", decay=0.5)
    sampler.observe([_episode(a1.task_key, 1.0), _episode(a1.task_key, 0.0), _episode(a2.task_key, 1.0), _episode(a2.task_key, 1.0),
                     _episode(b1.task_key, 1.0, env_error=True)])
    # a: (1 * 0.5 + 3, 1 * 0.5 + 1); b had only an env error: not rolled out, not decayed
    assert sampler.env_counts == {"a": [3.5, 1.5], "b": [1.0, 1.0]}
    assert sampler.counts[a2.task_key] == [2.5, 0.5]  # the tasks' counts go on as at level task


def test_a_saturated_env_fades_to_the_floor_and_a_failing_one_too(tasks):
    envs = _in_envs(tasks[:9], ["solved", "mixed", "failing"])
    sampler = _env_sampler(envs, "env", floor=0.3, decay=0.8, n=4)
    for _ in range(8):
        sampler.observe([_episode(t.task_key, {"solved": 1.0, "mixed": float(i % 2), "failing": 0.0}[t.env_key]) for t in envs for i in range(4)])
    shares = sampler.env_shares()
    assert shares["mixed"] > 0.6 and 0.1 <= shares["solved"] < 0.15 and 0.1 <= shares["failing"] < 0.15  # floor 0.3 / 3 envs at least


def test_default_level_is_task_and_keeps_no_env_counts(tasks):
    cfg = TrainerConfig.model_validate({"data": {"curriculum": {"enabled": True}}})
    assert cfg.data.curriculum.level == "task" and CurriculumSettings.of(cfg).level == "task"
    sampler = make_sampler(cfg, tasks[:4])
    assert sampler.env_counts is None and set(sampler.state()) == {"counts", "rng"}
    assert not any(key.endswith("/pass_rate") for key in sampler.metrics())
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        TrainerConfig.model_validate({"data": {"curriculum": {"level": "global"}}})


@pytest.mark.parametrize("level", ["env", "both"])
def test_env_level_state_round_trips_and_continues_exactly(tasks, level):
    envs = _in_envs(tasks[:20], ["hotel", "crm", "mail"])
    rate = {"hotel": 0.9, "crm": 0.1, "mail": 0.5}
    outcomes = random.Random(5)
    sampler = _env_sampler(envs, level, floor=0.1, decay=0.8, n=4, seed=7)
    for _ in range(6):
        batch = sampler.next_batch(4)
        sampler.observe([_episode(t.task_key, float(outcomes.random() < rate[t.env_key])) for t in batch for _ in range(4)])
    saved = json.loads(json.dumps(sampler.state()))
    assert set(saved["env_counts"]) == {"hotel", "crm", "mail"}
    fresh = _env_sampler(envs, level, floor=0.1, decay=0.8, n=4, seed=99)
    fresh.restore(saved)
    assert fresh.env_counts == sampler.env_counts and fresh.counts == sampler.counts
    assert fresh.metrics() == sampler.metrics()
    for _ in range(3):
        want = sampler.next_batch(4)
        assert fresh.next_batch(4) == want
        episodes = [_episode(t.task_key, float(outcomes.random() < rate[t.env_key])) for t in want for _ in range(4)]
        sampler.observe(episodes)
        fresh.observe(episodes)
    assert fresh.state() == sampler.state()


def test_a_checkpoint_of_the_other_level_kind_is_refused(tasks):
    envs = _in_envs(tasks[:6], ["hotel", "crm"])
    task_level, env_level = _env_sampler(envs, "task"), _env_sampler(envs, "env")
    with pytest.raises(ValueError, match="no env counts .*level task.*asks for level env"):
        env_level.restore(task_level.state())
    with pytest.raises(ValueError, match="keeps env counts.*asks for level task"):
        task_level.restore(env_level.state())
    with pytest.raises(ValueError, match="plain one"):
        env_level.restore(TaskSampler(envs, 0).state())
    with pytest.raises(ValueError, match="counts envs \\['crm', 'hotel'\\].*trains on \\['hotel'\\]"):
        _env_sampler(envs[::2], "env").restore(env_level.state())
    _env_sampler(envs, "both").restore(env_level.state())  # env and both keep the same counts
    with pytest.raises(ValueError, match="curriculum's, and this config leaves data.curriculum off"):
        TaskSampler(envs, 0).restore(task_level.state())


def test_a_probe_file_seeds_the_env_counts(tasks, tmp_path):
    a1, a2, b1 = _in_envs(tasks[:3], ["a", "a", "b"])
    probe = [SimpleNamespace(task_key=a1.task_key, env_key="a", successes=8, samples=8),
             SimpleNamespace(task_key=a2.task_key, env_key="a", successes=3, samples=8)]
    path = write_probe(tmp_path / "probe.json", probe, 8)
    cfg = TrainerConfig.model_validate({"data": {"curriculum": {"enabled": True, "level": "env", "prior_path": str(path)}}})
    sampler = make_sampler(cfg, [a1, a2, b1])
    assert sampler.env_counts == {"a": [12.0, 6.0], "b": [1.0, 1.0]}  # 1 + 8 + 3, 1 + 0 + 5; b not probed
    assert sampler.counts[a1.task_key] == [9.0, 1.0]


@pytest.mark.parametrize("successes, samples", [(-5, 8), (9, 8), (2.7, 8), (True, 8), (3, float("inf")), ("3", 8)])
def test_a_probe_file_with_impossible_counts_is_named(successes, samples, tasks, tmp_path):
    """Counts a probe cannot have (more successes than samples, fractions, infinity) would seed a pass rate below 0."""
    probe = [SimpleNamespace(task_key=tasks[0].task_key, env_key="hotel", successes=8, samples=8)]
    path = write_probe(tmp_path / "probe.json", probe, 8)
    data = json.loads(path.read_text())
    data["tasks"][0].update(successes=successes, samples=samples)
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=rf"task '{tasks[0].task_key}' has successes .* each must be a whole number, successes from 0 to samples"):
        read_probe(path)
    path.write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(ConfigError, match="cannot read it as JSON"):
        read_probe(path)
