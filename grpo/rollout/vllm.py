"""A colocated vLLM engine behind the generator seam (GPU): token ids in, sampled ids and their log-probs out.

One engine per trainer rank, on that rank's GPU, beside the policy and the reference (a share of the
GPU's memory: ``gpu_memory_utilization``). Between rollouts it sleeps (level 2: weights and KV cache
freed, so the update has the memory); after each optimizer step the policy's full parameters arrive in
buckets (``grpo.rollout.weights``), are written to shared memory as safetensors and loaded by the engine's worker in place
(``collective_rpc``), then the prefix cache is reset (cached prefixes hold the old weights' keys and
values). Log-probs are vLLM's ``processed_logprobs`` (after temperature), the same distribution the
trainer scores, so the trainer's recomputation measures desync (``rollout/logprob_gap``).

With a LoRA policy (``max_loras`` > 0) the engine keeps the frozen base and serves the adapter instead:
after each update ``load_adapter`` writes it (``grpo.rollout.adapters``) and the engine loads it under a
fresh id, dropping the old one; every request carries it. The base never changes, so the engine sleeps
at level 1 (weights kept in CPU memory) and no full weights travel.

The engine runs in its own process (vLLM's default), which sees only this rank's GPU
(``engine_visible_devices``). vLLM is imported here and only here; without it, constructing the
generator says how to install it. A second weight route, CUDA IPC (``EngineSettings.weight_route`` "ipc"):
each bucket cast on the GPU into one flat buffer whose IPC handle (torch's own reduction, pickled to bytes)
goes through the same RPC, the engine's worker opening the buffer in place and loading views of it: no copy
through host memory, no Ray. Built and measured by ``bench/weight_sync_gpu.py``; not a config key until it
has run on a GPU. Leaves out: tensor-parallel engines.
"""

from __future__ import annotations

import contextlib
import math
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from configkit import environ
from grpo.config import TrainerConfig
from grpo.distributed import ray_gpu_ids, visible_gpus
from grpo.rollout import Completion, SamplingParams, draw_rollout_seed
from grpo.rollout.adapters import AdapterShelf, AdapterVersion, engine_lora_rank
from grpo.rollout.weights import load_weights_file, share_weights, stage_weights, staging_dir


@dataclass(frozen=True)
class EngineSettings:
    """What the engine is built with (from ``rollout.vllm`` and the trial's limits)."""

    model_dir: str
    max_model_len: int
    gpu_memory_utilization: float = 0.3
    dtype: str = "bfloat16"
    enforce_eager: bool = False
    max_num_seqs: int = 256
    sleep_level: int = 2
    weight_bucket_mb: int = 512
    seed: int = 0
    hf_overrides: dict[str, Any] | None = None
    max_loras: int = 0  # adapters the engine holds at once (0: no LoRA; a LoRA trial's 1)
    max_lora_rank: int = 0  # vLLM's max_lora_rank (one of the values it accepts: grpo.rollout.adapters.engine_lora_rank)
    weight_route: Literal["shm", "ipc"] = "shm"  # how full weights travel: "shm" safetensors files in /dev/shm, "ipc" CUDA IPC handles (unverified)


def engine_settings(cfg: TrainerConfig, model_dir: str, rank: int) -> EngineSettings:
    """The engine a trial's rank runs, from ``rollout.vllm`` and the trial's limits (seeded per rank)."""
    from grpo.pretrained import vllm_hf_overrides

    v, r, lora = cfg.rollout.vllm, cfg.rollout, cfg.model.lora
    return EngineSettings(
        model_dir=model_dir,
        max_model_len=r.max_input_length + r.max_generate_length,
        gpu_memory_utilization=v.gpu_memory_utilization,
        dtype="bfloat16" if cfg.model.dtype == "bfloat16" else "float32",
        enforce_eager=v.enforce_eager,
        max_num_seqs=v.max_num_seqs,
        sleep_level=v.sleep_level if lora is None else 1,  # a LoRA engine's base never changes: kept through sleep
        weight_bucket_mb=v.weight_bucket_mb,
        seed=cfg.seed + rank,
        hf_overrides=vllm_hf_overrides(cfg.model, model_dir),
        max_loras=0 if lora is None else 1,
        max_lora_rank=0 if lora is None else engine_lora_rank(lora.rank),
    )


def engine_kwargs(settings: EngineSettings) -> dict[str, Any]:
    """vLLM's engine arguments for ``settings`` (``LLM`` and the streaming engine's ``AsyncEngineArgs`` alike)."""
    lora = dict(enable_lora=True, max_loras=settings.max_loras, max_lora_rank=settings.max_lora_rank) if settings.max_loras else {}
    return dict(
        model=settings.model_dir,
        skip_tokenizer_init=True,
        dtype=settings.dtype,
        gpu_memory_utilization=settings.gpu_memory_utilization,
        enable_sleep_mode=True,
        enforce_eager=settings.enforce_eager,
        max_model_len=settings.max_model_len,
        max_num_seqs=settings.max_num_seqs,
        seed=settings.seed,
        logprobs_mode="processed_logprobs",
        hf_overrides=settings.hf_overrides or {},
        **lora,
    )


def engine_visible_devices(local_rank: int, visible: str | None, ray_gpus: list[str] | None = None) -> str:
    """The ``CUDA_VISIBLE_DEVICES`` for this rank's engine process: the one GPU the rank trains on.

    Ray Train gives each worker the node's GPUs (``visible``, e.g. "4,5,6,7") and a local rank; an
    engine must not land on device 0 of every rank. A Ray worker that was given no GPU (``ray_gpus``
    empty; Ray leaves ``CUDA_VISIBLE_DEVICES`` unset or empty then) is an error, not "all GPUs".
    """
    if ray_gpus is not None and not ray_gpus:
        raise RuntimeError("this Ray worker was given no GPU (num_gpus=0): set resources.gpus_per_trial to 1 for rollout.backend 'vllm'")
    devices = visible_gpus(visible)
    if devices is None:
        return str(local_rank)
    if not devices:
        raise RuntimeError("CUDA_VISIBLE_DEVICES is empty: this process was given no GPU (a Ray actor with num_gpus=0?); set resources.gpus_per_trial")
    if local_rank >= len(devices):
        raise RuntimeError(f"local rank {local_rank} has no GPU: CUDA_VISIBLE_DEVICES={visible!r} lists {len(devices)}")
    return devices[local_rank]


@contextlib.contextmanager
def visible_devices(value: str) -> Iterator[None]:
    """Set ``CUDA_VISIBLE_DEVICES`` while the engine process is started (it inherits it), then restore it."""
    with environ.CUDA_VISIBLE_DEVICES.temporarily(value):
        yield


class SleepingEngine:
    """The sleep, wake, weight-load and adapter rules both vLLM generators follow (``VLLMGenerator`` and the streaming
    ``grpo.rollout.vllm_stream.VLLMStreamingGenerator``); each gives its engine's calls."""

    settings: EngineSettings
    asleep: bool = False
    shelf: AdapterShelf | None = None  # the adapters' folders and current versions, when the engine serves LoRA adapters
    adapter_name: str = "default"  # the adapter ``load_adapter`` and plain requests name by default (a lone LoRA trial's)

    def _sleep(self, level: int) -> None: ...

    def _wake(self, tags: list[str] | None) -> None: ...

    def _call_workers(self, fn: Callable, arg: Any) -> None:
        """Run ``fn(worker, arg)`` in the engine's workers (``collective_rpc``) and wait for it."""

    def _reset_prefix_cache(self) -> None: ...

    def _add_lora(self, version: AdapterVersion) -> bool: ...

    def _remove_lora(self, adapter_id: int) -> None: ...

    def _open_shelf(self, adapter_name: str) -> None:
        """Serve adapters when the settings say so (``max_loras`` > 0): their folders in memory, removed with the generator."""
        self.serves_adapter = self.settings.max_loras > 0
        self.adapter_name = adapter_name
        if self.serves_adapter:
            self.shelf = AdapterShelf(staging_dir(2**20))
            weakref.finalize(self, self.shelf.close)

    @property
    def adapter(self) -> AdapterVersion | None:
        """The served adapter's current version; None before its first load (the base alone: a fresh adapter's B is 0)."""
        return self.version_of(self.adapter_name)

    def version_of(self, name: str) -> AdapterVersion | None:
        """Adapter ``name``'s current version (None: the base, before its first load, or when the engine serves none)."""
        return None if self.shelf is None else self.shelf.current.get(name)

    def load_adapter(self, policy, name: str | None = None) -> None:
        """Adapter ``name``'s (default: the served one's) new weights, after an update: written as its next version,
        the old version unloaded first (with every slot taken, vLLM would make room by evicting another member's
        adapter), the new one loaded under a fresh id and name (so no cached prefix of the old one is reused), the
        old folder deleted. The base stays."""
        assert self.shelf is not None, "this engine serves no adapter (settings.max_loras is 0): use load_weights"
        name = name or self.adapter_name
        version = self.shelf.write(policy, name)
        self.wake()
        old = self.shelf.current.get(name)
        if old is not None:
            self._remove_lora(old.id)
        if not self._add_lora(version):
            raise RuntimeError(f"vLLM did not load adapter {name!r} (version {version.id}) from {version.path}")
        if (replaced := self.shelf.commit(version)) is not None:
            self.shelf.retire(replaced)

    def drop_adapter(self, name: str) -> None:
        """Adapter ``name`` leaves the engine (a pack's member that left): its version unloaded and deleted."""
        version = None if self.shelf is None else self.shelf.current.pop(name, None)
        if version is not None:
            self._remove_lora(version.id)
            assert self.shelf is not None
            self.shelf.retire(version)

    def sleep(self) -> None:
        """Free the engine's GPU memory for the update (level 2 drops the weights: ``load_weights`` must follow)."""
        if not self.asleep:
            self._sleep(self.settings.sleep_level)
            self.asleep = True

    def wake(self) -> None:
        if self.asleep:
            if self.settings.sleep_level == 2:
                raise RuntimeError("the vLLM engine slept at level 2 (weights dropped): load_weights must come before it samples again")
            self._wake(None)
            self.asleep = False

    def load_weights(self, weights: Iterable[tuple[str, Any]]) -> None:
        """Load the policy's full parameters (in the engine's dtype) bucket by bucket, by the settings' route
        (``stage_weights`` through /dev/shm, or ``share_weights`` by CUDA IPC), then drop stale prefixes (cached
        keys and values of the old weights)."""
        if self.asleep:
            self._wake(["weights"])
        if self.settings.weight_route == "ipc":
            share_weights(weights, self.settings.weight_bucket_mb, self.settings.dtype, self._call_workers)
        else:
            stage_weights(weights, self.settings.weight_bucket_mb, self.settings.dtype, lambda path: self._call_workers(load_weights_file, path))
        if self.asleep:
            self._wake(["kv_cache"])
            self.asleep = False
        self._reset_prefix_cache()


class VLLMGenerator(SleepingEngine):
    needs_weight_sync = True
    streams = False  # one batch per turn (rollout.turns: batched); per episode: grpo.rollout.vllm_stream

    def __init__(self, settings: EngineSettings, stop_id: int, local_rank: int = 0, adapter_name: str = "default"):
        """``adapter_name``: the peft adapter the engine serves when ``settings.max_loras`` > 0 (a LoRA trial's)."""
        try:
            from vllm import LLM
        except ImportError as exc:
            raise no_vllm(exc) from None
        environ.VLLM_ALLOW_INSECURE_SERIALIZATION.set_default("1")  # collective_rpc with our load function
        self.settings = settings
        self.stop_id = stop_id
        self._open_shelf(adapter_name)
        with visible_devices(engine_visible_devices(local_rank, environ.CUDA_VISIBLE_DEVICES.get(), ray_gpu_ids())):
            self.llm = LLM(**engine_kwargs(settings))

    def generate(self, prompts: list[list[int]], sampling: SamplingParams) -> list[Completion]:
        return self.generate_as(self.adapter_name, prompts, sampling)

    def generate_as(self, name: str, prompts: list[list[int]], sampling: SamplingParams) -> list[Completion]:
        """Sample through adapter ``name``'s current version (the base when it has none, or the engine serves none)."""
        from vllm.inputs import TokensPrompt

        self.wake()
        params = vllm_sampling(sampling, self.stop_id)
        version = self.version_of(name)
        adapter = None if version is None else lora_request(version)
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False, lora_request=adapter)
        return [completion_of(out.outputs[0]) for out in outputs]

    def _add_lora(self, version: AdapterVersion) -> bool:
        return self.llm.llm_engine.add_lora(lora_request(version))

    def _remove_lora(self, adapter_id: int) -> None:
        self.llm.llm_engine.remove_lora(adapter_id)

    def _sleep(self, level: int) -> None:
        self.llm.sleep(level=level)

    def _wake(self, tags: list[str] | None) -> None:
        self.llm.wake_up(tags=tags)

    def _call_workers(self, fn: Callable, arg: Any) -> None:
        self.llm.collective_rpc(fn, args=(arg,))

    def _reset_prefix_cache(self) -> None:
        self.llm.reset_prefix_cache()


class ServedAdapter:
    """One adapter's generator on an engine that serves several (a pack's member on the pack's engine): its
    requests carry its own adapter, and its updates reload only that adapter. Sleep and wake are the engine's.
    On a streaming engine it streams too (``agenerate``), and its rollout seeds come from ``seeds`` when a pack has
    set it (its members roll out at once, each from its own RNG: ``grpo.pack.Pack.step_round``), else from torch's."""

    needs_weight_sync = True
    serves_adapter = True

    def __init__(self, engine: SleepingEngine, name: str):
        self.engine, self.name = engine, name
        self.streams = engine.streams  # type: ignore[attr-defined]  # each generator class says whether it streams
        self.seeds: Any = None  # a torch.Generator while the pack rolls its members out at once

    def generate(self, prompts: list[list[int]], sampling: SamplingParams) -> list[Completion]:
        return self.engine.generate_as(self.name, prompts, sampling)  # type: ignore[attr-defined]

    async def agenerate(self, prompt: list[int], sampling: SamplingParams) -> Completion:
        return await self.engine.agenerate_as(self.name, prompt, sampling)  # type: ignore[attr-defined]

    def rollout_seed(self) -> int:
        """As ``VLLMStreamingGenerator.rollout_seed`` draws it, from ``seeds`` when set."""
        return draw_rollout_seed(self.seeds)

    def load_adapter(self, policy) -> None:
        self.engine.load_adapter(policy, self.name)

    def sleep(self) -> None:
        self.engine.sleep()

    def wake(self) -> None:
        self.engine.wake()


def lora_request(version: AdapterVersion):
    """vLLM's request for a written adapter version (its id is what vLLM caches the adapter by)."""
    from vllm.lora.request import LoRARequest

    return LoRARequest(version.served_name, version.id, version.path)


def no_vllm(exc: ImportError) -> RuntimeError:
    """What a trial without vLLM says when its config asks for it."""
    return RuntimeError(f"rollout.backend='vllm' needs vLLM on the GPU machine ({exc}); install it there (`pip install vllm`), "
                        "or set rollout.backend='hf'")


def vllm_sampling(sampling: SamplingParams, stop_id: int, final_only: bool = False):
    """vLLM's sampling parameters for one of our requests: the chat's end id the only stop (not the model's own
    EOS, as for the HF sampler), the chosen tokens' log-probs, no text; a request's own seed when it has one;
    ``final_only``: the async engine reports the finished request only (not every token)."""
    from vllm import SamplingParams as VLLMSampling

    extra = {}
    if final_only:
        from vllm.sampling_params import RequestOutputKind

        extra["output_kind"] = RequestOutputKind.FINAL_ONLY
    return VLLMSampling(temperature=sampling.temperature, top_p=1.0, max_tokens=sampling.max_new_tokens, stop_token_ids=[stop_id],
                        ignore_eos=True, logprobs=0, detokenize=False, seed=sampling.seed, **extra)


def completion_of(sample) -> Completion:
    """One of vLLM's completion outputs as ours (vLLM keeps the stop id in ``token_ids``)."""
    ids = list(sample.token_ids)
    logprobs = [_chosen_logprob(position, token) for position, token in zip(sample.logprobs or [], ids)]
    logprobs += [math.nan] * (len(ids) - len(logprobs))
    return Completion(ids, logprobs, "stop" if sample.finish_reason == "stop" else "length")


def _chosen_logprob(position, token: int) -> float:
    """The sampled token's log-prob from one position of vLLM's logprobs (a dict id -> Logprob)."""
    if position is None or token not in position:
        return math.nan
    return float(position[token].logprob)
