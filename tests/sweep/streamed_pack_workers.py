"""What every Ray worker of ``test_packing_streamed.py`` runs first (Ray's ``worker_process_setup_hook``): vLLM's
streaming engine stood in by ``tests.grpo.test_lora_vllm.HFBackedEngine`` (HF in the worker's process), each
trial's config put on that engine after validation, as the in-process tests do (the config refuses LoRA with vLLM
until the GPU check runs it), and the rounds made to wait for every member. The engine writes the most members'
adapters it held in flight at once, in rollouts and in evals, to ``{STREAMED_PACK_LOG}/{pid}.json``. Does nothing
where that variable is unset."""

from __future__ import annotations

import json
import os
from pathlib import Path

LOG = "STREAMED_PACK_LOG"
_KEPT: list = []


def install() -> None:
    if not os.environ.get(LOG):
        return
    import pytest

    import grpo.rollout.vllm_stream as vllm_stream
    import sweep.trials.packing as packing
    import sweep.trials.trial as trial
    from tests.grpo.test_lora_vllm import HFBackedEngine, HFBackedLLM, _streamed, counting_evals
    from tests.grpo.test_rollout_adapters import install_stand_in_vllm

    class LoggedEngine(HFBackedEngine):
        async def sample(self, *args, **kwargs):
            done = await super().sample(*args, **kwargs)
            seen = {"most_at_once": self.most_at_once, "most_at_once_in_evals": self.most_at_once_in_evals}
            if seen != getattr(self, "logged", None):
                self.logged = seen
                Path(os.environ[LOG], f"{os.getpid()}.json").write_text(json.dumps(seen))
            return done

    patch = pytest.MonkeyPatch()  # for the worker's life
    install_stand_in_vllm(patch, HFBackedLLM)
    patch.setattr(vllm_stream.AsyncVLLM, "start", LoggedEngine.start)
    validated = trial.trial_config
    patch.setattr(trial, "trial_config", lambda base, overrides: _streamed(validated(base, overrides)))
    # the first round waits for the host to fill, and every round for both members, however slow a loaded machine
    # makes a trial's start or report (the wait's own rule is tested in process: tests/grpo/test_lora_vllm.py)
    patch.setattr(packing, "ROUND_WAIT_S", 120.0)
    due = packing.PackHost._round_due

    def once_full(host) -> bool:
        host.filled = getattr(host, "filled", False) or len(host.members) >= host.capacity
        return host.filled and due(host)

    patch.setattr(packing.PackHost, "_round_due", once_full)
    counting = counting_evals()  # packed evals counted, so the engine knows when two members evaluate
    counting.__enter__()
    _KEPT.append(counting)  # a dropped generator would close, and undo its patch
