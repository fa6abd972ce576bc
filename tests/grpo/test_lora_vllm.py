"""LoRA trials and packs sampled the way vLLM serves adapters, on CPU: the engine keeps the base and each request
names an adapter it loaded from the folder the trainer wrote. vLLM needs CUDA, so ``HFBackedLLM`` stands in for
its ``LLM``: the base read from the model folder, each adapter read back by peft from its folder when the engine
is told to add it (and forgotten when told to remove it: a request naming a stale id fails), sampled by our HF
generator. A trial (or a pack) sampled that way reports what it reports sampled by HF from the policy itself,
step for step, only when every update's adapter reaches the engine under the right name. The real engine runs
in ``tests/gpu/test_vllm_lora.py``; the config refuses LoRA with vLLM until it passes there, so these tests build
their configs with the backend set after validation."""

from __future__ import annotations

import asyncio
import functools
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace

import pytest
import torch

from grpo.chat import ChatFormat
from grpo.config import TrainerConfig
from grpo.pack import Pack, PackError, train_packed
from grpo.policy import load_policy
from grpo.reporting import ListReporter
from grpo.rollout import Completion, SamplingParams
from grpo.rollout.hf import HFGenerator
from grpo.tiny import load_tiny_tokenizer
from grpo.trainer import train
from tests.grpo.test_pack import BASE, TRIALS, UNEQUAL, _alone, _assert_same_reports, _cfg
from tests.grpo.test_rollout_adapters import StandInLLM, StandInStreamingEngine, install_stand_in_vllm

pytestmark = pytest.mark.slow


class HFBackedLLM(StandInLLM):
    """vLLM's ``LLM`` with LoRA on, in HF: what it was built with, and every call, recorded (``StandInLLM``'s)."""

    built: list[HFBackedLLM] = []

    def __init__(self, model: str, **kwargs):
        super().__init__(**kwargs)
        self.model_dir = model
        self.pad_id = ChatFormat(load_tiny_tokenizer(model)).pad_id
        self.base = self._load()
        self.adapters: dict[int, torch.nn.Module] = {}
        HFBackedLLM.built.append(self)

    def _load(self, adapter: str | None = None) -> torch.nn.Module:
        from peft import PeftModel

        with torch.random.fork_rng(devices=[]):  # building layers draws their initial weights: not the trial's draws
            model = load_policy(self.model_dir, False)
            return model if adapter is None else PeftModel.from_pretrained(model, adapter).eval()

    def _add_lora(self, request) -> bool:
        self.adapters[request.lora_int_id] = self._load(request.lora_path)
        self.calls.append(("add_lora", request.lora_name, request.lora_int_id))
        return True

    def _remove_lora(self, lora_id: int) -> bool:
        del self.adapters[lora_id]
        return super()._remove_lora(lora_id)

    def generate(self, prompts, params, use_tqdm=False, lora_request=None):
        model = self.base if lora_request is None else self.adapters[lora_request.lora_int_id]
        self.calls.append(("generate", None if lora_request is None else lora_request.lora_name))
        sampling = SamplingParams(max_new_tokens=params.max_tokens, temperature=params.temperature, seed=params.seed)
        done = HFGenerator(model, stop_id=params.stop_token_ids[0], pad_id=self.pad_id).generate([p["prompt_token_ids"] for p in prompts], sampling)
        return [SimpleNamespace(outputs=[SimpleNamespace(token_ids=c.token_ids, finish_reason=c.finish_reason,
                                                         logprobs=[{t: SimpleNamespace(logprob=lp)} for t, lp in zip(c.token_ids, c.logprobs)])])
                for c in done]


@pytest.fixture
def hf_backed_vllm(monkeypatch):
    """``HFBackedLLM`` as vLLM's engine (``install_stand_in_vllm``); yields the engines built."""
    install_stand_in_vllm(monkeypatch, HFBackedLLM)
    HFBackedLLM.built.clear()
    yield HFBackedLLM.built
    HFBackedLLM.built.clear()


def _on_vllm(cfg: TrainerConfig) -> TrainerConfig:
    """``cfg`` sampled by vLLM (set after validation: the config refuses LoRA with vLLM until the GPU test passes)."""
    return cfg.model_copy(update={"rollout": cfg.rollout.model_copy(update={"backend": "vllm"})})


def test_a_lora_trial_sampled_through_the_engine_reports_what_it_reports_with_hf(hf_backed_vllm, monkeypatch):
    """Three steps of a LoRA trial whose engine samples each update's adapter: the same reports as the trial sampled
    by HF from the policy itself, the sampler's log-probs the policy's; the engine was built with LoRA on, slept
    at level 1, and took a fresh id per update. With the adapter never reloaded, the reports part at step 2."""
    cfg = _cfg(TRIALS[1])
    reporter = ListReporter()
    train(_on_vllm(cfg), reporter)
    _assert_same_reports(reporter, _alone(1), "LoRA on the engine vs HF")
    assert all(m["rollout/logprob_gap"] < 1e-5 for _, m in reporter.reports)
    (engine,) = hf_backed_vllm
    assert (engine.kwargs["enable_lora"], engine.kwargs["max_loras"], engine.kwargs["max_lora_rank"]) == (True, 1, 8)
    adds = [c for c in engine.calls if c[0] == "add_lora"]
    assert [c[1:] for c in adds] == [("default-1", 1), ("default-2", 2), ("default-3", 3)]  # a fresh id and name per update
    assert ("sleep", 1) in engine.calls and [c[1] for c in engine.calls if c[0] == "remove_lora"] == [1, 2]

    import grpo.rollout.vllm as vllm_generator

    monkeypatch.setattr(vllm_generator.VLLMGenerator, "load_adapter", lambda self, policy, name=None: None)
    stale = ListReporter()
    train(_on_vllm(cfg), stale)
    assert stale.reports[0][1]["rollout/logprob_gap"] < 1e-5  # step 1 samples the fresh adapter: the base, alike
    assert all(m["rollout/logprob_gap"] > 1e-3 for _, m in stale.reports[1:])  # then the sampler lags the policy


def test_packed_trials_on_one_engine_each_sample_their_own_adapter(hf_backed_vllm):
    """Two LoRA trials packed on one engine (capacity 2) report what each reports alone with HF, step for step: each
    member's requests named its own adapter, each update reloaded only that one, and a member that leaves takes
    its adapter out of the engine."""
    cfgs = [_on_vllm(_cfg(TRIALS[i])) for i in (0, 1)]
    packed = [ListReporter(), ListReporter()]
    train_packed(cfgs, packed)
    for i, reporter in enumerate(packed):
        _assert_same_reports(reporter, _alone(i), f"member {i} on the engine vs alone with HF")
    (engine,) = hf_backed_vllm
    assert engine.kwargs["max_loras"] == 2
    generates = [c[1] for c in engine.calls if c[0] == "generate"]
    assert {n.rsplit("-", 1)[0] for n in generates if n} == {"trial_0", "trial_1"} and None in generates[:2]  # before a first update: the base (B is 0)
    adds = [c for c in engine.calls if c[0] == "add_lora"]
    assert sorted(c[1].rsplit("-", 1)[0] for c in adds) == ["trial_0"] * 3 + ["trial_1"] * 3 and len({c[2] for c in adds}) == 6

    with Pack(cfgs[0], 1) as pack:
        member = pack.join(cfgs[0])
        pack.step(member)
        one = HFBackedLLM.built[-1]
        assert list(one.adapters) == [1]
        pack.leave(member)
        assert one.adapters == {} and one.calls[-1] == ("remove_lora", 1)


def test_a_pack_engine_refuses_a_member_whose_rank_it_cannot_hold(hf_backed_vllm):
    first = _on_vllm(_cfg({}))  # rank 2: the engine holds ranks up to 8
    wide = _on_vllm(_cfg({"model": {**BASE["model"], "lora": {"rank": 16, "alpha": 32.0}}}))
    with Pack(first, 2) as pack:
        with pytest.raises(PackError, match=r"model.lora.rank 16 is above the pack's vLLM engine's max_lora_rank 8"):
            pack.join(wide)


def test_a_pack_engine_refuses_a_member_whose_episodes_it_cannot_hold(hf_backed_vllm):
    """The engine's context is its first member's max_input_length + max_generate_length: a member with longer
    episodes would have them cut or refused mid-step, so it is refused when it joins, by name."""
    first = _on_vllm(_cfg({}))
    longer = _on_vllm(_cfg({"rollout": {**BASE["rollout"], "max_generate_length": 96}}))
    shorter = _on_vllm(_cfg({"rollout": {**BASE["rollout"], "max_generate_length": 32}}))
    with Pack(first, 2) as pack:
        length = first.rollout.max_input_length + 64
        with pytest.raises(PackError, match=rf"\({first.rollout.max_input_length} \+ 96 = {length + 32}\) is above the pack's vLLM engine's max_model_len {length}"):
            pack.join(longer)
        assert pack.join(shorter).name == "trial_0"  # shorter episodes fit; the refused member took no name


def test_a_member_whose_join_fails_leaves_no_adapter_behind(hf_backed_vllm):
    """A join that fails after its adapter was made and loaded into the engine (its progress fails to start after the
    sampler took the adapter, as a resume from a broken checkpoint would): the adapter leaves the model and the engine,
    whose places are the pack's capacity, and the next member joins and steps."""
    import grpo.pack
    from grpo.trainer import sync_sampler

    def resumes_then_breaks(cfg, models, *args, **kwargs):
        sync_sampler(models)  # as a resume does
        raise RuntimeError("its checkpoint is broken")

    first, second = (_on_vllm(_cfg(TRIALS[i])) for i in (0, 1))
    with Pack(first, 2) as pack:
        a = pack.join(first)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(grpo.pack, "start_progress", resumes_then_breaks)
            with pytest.raises(RuntimeError, match="its checkpoint is broken"):
                pack.join(second)
        (engine,) = hf_backed_vllm
        assert [c[1] for c in engine.calls if c[0] == "add_lora"] == ["trial_1-1"]  # it reached the engine
        assert engine.adapters == {} and pack.engine.shelf.current == {}  # and left it
        assert set(pack.policy.peft_config) == {a.name}
        b = pack.join(second)
        assert set(pack.policy.peft_config) == {a.name, b.name}
        pack.step(a), pack.step(b)
        assert sorted(pack.engine.shelf.current) == sorted([a.name, b.name])


def test_a_pack_shares_its_sampler_settings():
    """The backend and the engine's settings are the pack's: a member that differs is refused by name."""
    from grpo.pack import check_packable

    with pytest.raises(PackError, match=r"'rollout.vllm.gpu_memory_utilization' \(0.3 vs 0.5\)"):
        check_packable(_cfg({}), _cfg({"rollout": {**BASE["rollout"], "vllm": {"gpu_memory_utilization": 0.5}}}))
    with pytest.raises(PackError, match=r"'rollout.turns' \('per_episode' vs 'batched'\)"):  # the engine: streaming or a batch per turn
        check_packable(STREAMED[0], _on_vllm(_cfg({})))


class HFBackedEngine(StandInStreamingEngine):
    """vLLM's ``AsyncLLM`` with LoRA on, in HF (a ``grpo.rollout.vllm_stream.StreamingEngine``): the base read from
    the model folder, each adapter read back by peft from its folder when added; each request waits a moment (as a
    request waits for the engine's next step, so the requests of every member's thread are live together), then is
    sampled alone from its own seed (HF's ``agenerate``). Records the most members' adapters in flight at once."""

    built: list[HFBackedEngine] = []
    evaluating = 0  # packed members' evals under way (``counting_evals``)

    def __init__(self, settings, stop_id: int):
        super().__init__()
        self.settings, self.stop_id = settings, stop_id
        self.llm = HFBackedLLM(settings.model_dir)  # its loaders, and its base
        self.adapters: dict[int, torch.nn.Module] = {}
        self.in_flight: Counter[str] = Counter()
        self.most_at_once = 0
        self.most_at_once_in_evals = 0  # while two or more members evaluate

    @classmethod
    async def start(cls, settings, stop_id: int) -> HFBackedEngine:
        engine = cls(settings, stop_id)
        cls.built.append(engine)
        return engine

    async def sample(self, request_id: str, prompt: list[int], sampling: SamplingParams, adapter=None) -> Completion:
        name = "base" if adapter is None else adapter.name
        self.in_flight[name] += 1
        at_once = sum(1 for k, v in self.in_flight.items() if v and k != "base")
        self.most_at_once = max(self.most_at_once, at_once)
        if HFBackedEngine.evaluating >= 2:
            self.most_at_once_in_evals = max(self.most_at_once_in_evals, at_once)
        try:
            await asyncio.sleep(0.002)
        finally:
            self.in_flight[name] -= 1
        model = self.llm.base if adapter is None else self.adapters[adapter.id]
        return await HFGenerator(model, stop_id=self.stop_id, pad_id=self.llm.pad_id).agenerate(prompt, sampling)

    async def add_adapter(self, version) -> bool:
        self.adapters[version.id] = self.llm._load(version.path)
        self.calls.append(("add", version.served_name))
        return True

    async def remove_adapter(self, adapter_id: int) -> bool:
        del self.adapters[adapter_id]
        self.calls.append(("remove", adapter_id))
        return True

    async def call_workers(self, fn, arg) -> None:
        raise AssertionError("a LoRA engine loads adapters, never full weights")


def _streamed(cfg: TrainerConfig) -> TrainerConfig:
    """``cfg`` on vLLM's streaming engine (set after validation, as ``_on_vllm``)."""
    return cfg.model_copy(update={"rollout": cfg.rollout.model_copy(update={"backend": "vllm", "turns": "per_episode"})})


STREAMED = [_streamed(_cfg(TRIALS[i], eval={"interval": 2, "n_samples": 1})) for i in (0, 1)]  # evals after steps 2 and 3


@contextmanager
def hf_backed_streaming() -> Iterator[list[HFBackedEngine]]:
    """``HFBackedEngine`` as vLLM's streaming engine while the block runs; yields the engines built."""
    import grpo.rollout.vllm_stream as vllm_stream

    with pytest.MonkeyPatch.context() as patch:
        install_stand_in_vllm(patch, HFBackedLLM)
        patch.setattr(vllm_stream.AsyncVLLM, "start", HFBackedEngine.start)
        HFBackedEngine.built.clear()
        yield HFBackedEngine.built


@contextmanager
def counting_evals() -> Iterator[None]:
    """A pack's evals counted while the block runs (``HFBackedEngine.evaluating``)."""
    import grpo.pack

    lock, evaluate = threading.Lock(), grpo.pack.evaluate

    def counted(*args, **kwargs):
        with lock:
            HFBackedEngine.evaluating += 1
        try:
            return evaluate(*args, **kwargs)
        finally:
            with lock:
                HFBackedEngine.evaluating -= 1

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(grpo.pack, "evaluate", counted)
        yield


@functools.cache
def _alone_streamed(i: int) -> tuple[ListReporter, list[str]]:
    """``STREAMED[i]`` trained alone as a LoRA trial on the streaming engine, once for the module: its reports, and
    the adapter versions its engine was given."""
    reporter = ListReporter()
    with hf_backed_streaming() as built:
        train(STREAMED[i], reporter)
        (engine,) = built
    return reporter, [c[1] for c in engine.calls if c[0] == "add"]


def test_packed_members_roll_out_at_once_on_one_streaming_engine_and_report_what_each_reports_alone():
    """Two LoRA trials packed on one streaming engine: each round their rollouts run at once, each member's requests
    from its own thread through its own adapter into the one engine (both members' adapters in flight together), and
    each member reports what it reports alone as a LoRA trial on that engine, step for step (its rollout seeds from its
    own RNG, whatever the other's timing); then their evals the same way, at once (both adapters in flight while both
    evaluate), each from the eval's own seed. The lone runs sample their adapters too (three loads each)."""
    alone = [_alone_streamed(i) for i in (0, 1)]
    assert [adds for _, adds in alone] == [[f"default-{i}" for i in (1, 2, 3)]] * 2
    assert [m["policy/grad_norm"] for _, m in alone[0][0].reports] != [m["policy/grad_norm"] for _, m in alone[1][0].reports]  # two trials

    packed = [ListReporter(), ListReporter()]
    with hf_backed_streaming() as built, counting_evals():
        train_packed(STREAMED, packed)
        (engine,) = built
    for i, reporter in enumerate(packed):
        _assert_same_reports(reporter, alone[i][0], f"member {i} rolled out beside the other vs alone")
    assert engine.settings.max_loras == 2
    assert engine.most_at_once == 2  # both members' adapters had requests in the engine at once
    assert engine.most_at_once_in_evals == 2  # and while both members evaluated
    assert [m["eval/global_step"] for _, m in packed[0].reports] == [0.0, 2.0, 3.0]  # a round after a packed eval too
    assert not [t for t in threading.enumerate() if t.name.startswith(("pack-rollouts", "pack-evals"))]  # the threads ended


def test_a_member_whose_packed_eval_fails_takes_only_its_own_step_down():
    """A round whose evals run at once, one of them raising: that member gets the error (its step not counted, its
    eval not recorded), and the other goes on to report what it reports alone."""
    import grpo.pack

    alone = _alone_streamed(0)[0]
    evaluate = grpo.pack.evaluate

    def fails_for_the_second(cfg, models, tasks, envs, step, **kwargs):
        if cfg.seed == STREAMED[1].seed and step == 2:
            raise RuntimeError("the eval's environment went away")
        return evaluate(cfg, models, tasks, envs, step, **kwargs)

    got = ListReporter()
    with hf_backed_streaming(), pytest.MonkeyPatch.context() as patch, Pack(STREAMED[0], 2) as pack:
        patch.setattr(grpo.pack, "evaluate", fails_for_the_second)
        a, b = pack.join(STREAMED[0]), pack.join(STREAMED[1])
        for _ in range(2):
            first, second = pack.step_round([a, b])
            got.report(*first)
        assert isinstance(second, RuntimeError) and "went away" in str(second)
        assert b.next_step == 2 and not b.progress.evals.has(2) and a.next_step == 3
        pack.leave(b)
        got.report(*pack.step_round([a])[0])
    _assert_same_reports(got, alone, "the member whose eval did not fail")


def test_a_pack_host_steps_members_that_roll_out_together_in_rounds():
    """Under Tune (``sweep.trials.packing.PackHost``, here in this process, its calls in threads as Ray's actor runs
    them): each member's step call waits for the round that steps every member, their rollouts at once, and each
    member's reports are its lone run's."""
    from sweep.trials.packing import PackHost

    reports = {"a": ListReporter(), "b": ListReporter()}
    with hf_backed_streaming() as built:
        host = PackHost(STREAMED[0], 2)
        try:
            assert host.rounds
            assert host.join("a", STREAMED[0]) and host.join("b", STREAMED[1])

            def trial(name: str) -> None:
                while (out := host.step(name)) is not None:
                    reports[name].report(*out)

            threads = [threading.Thread(target=trial, args=(name,)) for name in reports]
            for t in threads:
                t.start()
            for t in threads:
                t.join(600)
        finally:
            host.pack.__exit__(None, None, None)
        (engine,) = built
    assert not any(t.is_alive() for t in threads)
    assert engine.most_at_once == 2
    for i, name in enumerate(reports):
        _assert_same_reports(reports[name], _alone_streamed(i)[0], f"member {name} in the host's rounds vs alone", (*UNEQUAL, "pack/"))


def test_a_join_during_a_long_round_takes_no_member_from_it(monkeypatch):
    """A round that lasts longer than ``STALE_S`` (here 1.5 s against 0.3 s): a trial that tries the full host meanwhile
    waits for the round's end and finds no member lost, each stepped just now, though neither has asked since before
    the round; it is refused, and both members have their steps."""
    import sweep.trials.packing as packing

    monkeypatch.setattr(packing, "STALE_S", 0.3)
    with hf_backed_streaming():
        host = packing.PackHost(STREAMED[0], 2)
        step_round = host.pack.step_round

        def long_round(members):
            threading.Event().wait(1.5)
            return step_round(members)

        host.pack.step_round = long_round
        try:
            assert host.join("a", STREAMED[0]) and host.join("b", STREAMED[1])
            got: dict[str, object] = {}
            threads = [threading.Thread(target=lambda n=n: got.__setitem__(n, host.step(n))) for n in ("a", "b")]
            for t in threads:
                t.start()
            while not host._stepping:
                threading.Event().wait(0.01)
            assert not host.join("c", STREAMED[0])  # after the round: the host is full, no one lost
            for t in threads:
                t.join(120)
            assert set(host.members) == {"a", "b"} and [got[n][0] for n in ("a", "b")] == [1, 1]
        finally:
            host.pack.__exit__(None, None, None)


def test_a_pack_hosts_rounds_wait_once_for_a_member_that_never_asks(monkeypatch):
    """A member whose trial died without leaving (it never asks for a step): the first round waits ``ROUND_WAIT_S`` for
    it, then steps the one that asked; later rounds no longer wait for it, and the one that asked reports its lone
    run's numbers. Its step call, had it been waiting when it was made to leave, gets an error, not a step."""
    import sweep.trials.packing as packing

    monkeypatch.setattr(packing, "ROUND_WAIT_S", 0.3)
    reporter = ListReporter()
    with hf_backed_streaming():
        host = packing.PackHost(STREAMED[0], 2)
        try:
            assert host.join("a", STREAMED[0]) and host.join("dead", STREAMED[1])
            assert host._expected == {"a", "dead"}
            first = host.step("a")
            assert host._expected == {"a"}  # it missed the round: not waited for again
            reporter.report(*first)
            while (out := host.step("a")) is not None:
                reporter.report(*out)
            assert host._expected == {"a"} and host.members["dead"].next_step == 1  # never stepped
            waiting = threading.Thread(target=lambda: pytest.raises(RuntimeError, host.step, "dead"))
            host._stepping = True  # a round under way: the call waits
            waiting.start()
            while "dead" not in host._asked:
                threading.Event().wait(0.01)
            host._stepping = False
            host.members.pop("dead")  # as a leave would (without ending the host: it has Ray's exit)
            waiting.join(10)
            assert not waiting.is_alive()
        finally:
            host.pack.__exit__(None, None, None)
    _assert_same_reports(reporter, _alone_streamed(0)[0], "the member that asked vs alone", (*UNEQUAL, "pack/"))
