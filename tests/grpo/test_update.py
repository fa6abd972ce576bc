"""The policy update on a real tiny model: it moves the right way, clips off-policy, and measures KL."""

from __future__ import annotations

import math

import pytest
import torch

from grpo.batching import collate
from grpo.policy import load_policy, token_logprobs
from grpo.update import UpdateSettings, policy_update
from grpo.warmstart import reference_conversation, supervised_example


def _batch(chat, tasks, advantages):
    examples = [supervised_example(chat, reference_conversation(t)) for t in tasks]
    return collate([e[0] for e in examples], [e[1] for e in examples], advantages, chat.pad_id)


def _own_logprob(model, batch, row):
    with torch.no_grad():
        logp, _ = token_logprobs(model, batch.input_ids, batch.attention_mask)
    return (logp[row] * batch.loss_mask[row]).sum().item()


def _one_update(tiny_base, batch, advantage_sign):
    torch.manual_seed(0)
    policy = load_policy(tiny_base)
    batch.advantages = torch.full_like(batch.advantages, advantage_sign)
    before = _own_logprob(policy, batch, 0)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-3)
    settings = UpdateSettings(clip_low=0.2, clip_high=0.2, kl_coef=0.0, mini_batches=1, max_grad_norm=1.0, temperature=1.0)
    stats = policy_update(policy, None, optimizer, batch, settings, torch.Generator().manual_seed(0))
    return before, _own_logprob(policy, batch, 0), stats


def test_advantage_sign_sets_the_direction(tiny_base, chat, tasks):
    up_before, up_after, stats = _one_update(tiny_base, _batch(chat, tasks[:1], [1.0]), 1.0)
    down_before, down_after, _ = _one_update(tiny_base, _batch(chat, tasks[:1], [1.0]), -1.0)
    assert up_after > up_before and down_after < down_before
    assert stats["policy/clip_frac"] == 0.0  # one on-policy mini-batch: ratio 1, nothing to clip
    assert stats["policy/kl"] == 0.0 and stats["policy/grad_norm"] > 0


def test_later_mini_batches_are_clipped_and_kl_grows(tiny_base, chat, tasks):
    torch.manual_seed(0)
    policy = load_policy(tiny_base)
    reference = load_policy(tiny_base, trainable=False)
    batch = _batch(chat, tasks[:8], [1.0, -1.0] * 4)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=2e-2)
    settings = UpdateSettings(clip_low=0.1, clip_high=0.1, kl_coef=0.1, mini_batches=4, max_grad_norm=10.0, temperature=1.0, ppo_epochs=2)
    stats = policy_update(policy, reference, optimizer, batch, settings, torch.Generator().manual_seed(0))
    assert 0.0 < stats["policy/clip_frac"] <= 1.0
    assert stats["policy/clip_frac"] == pytest.approx(stats["policy/clip_frac_low"] + stats["policy/clip_frac_high"])
    assert stats["policy/kl"] > 0.0
    assert all(not p.requires_grad for p in reference.parameters())


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
def test_tool_result_and_overlong_tokens_get_no_gradient(chat, tasks, agg):
    from grpo.algorithm import kl_k3, loss_aggregation, ppo_clipped_loss

    # a two-call episode (tool results inside) and the same episode truncated by the overlong filter
    batch = _batch(chat, [tasks[40], tasks[40]], [1.0, -1.0])
    batch.loss_mask[1] = 0.0  # what Trajectory.filter_overlong leaves: nothing of it is trained on
    steps = batch.loss_mask.shape[1]
    logprobs = torch.full((2, steps), -1.0, requires_grad=True)
    old, ref = torch.full((2, steps), -1.1), torch.full((2, steps), -0.9)
    mask = batch.loss_mask
    agg_fn = loss_aggregation(agg)
    loss = agg_fn(ppo_clipped_loss(logprobs, old, batch.advantages, 0.2, 0.2).loss, mask, 640) + 0.1 * agg_fn(kl_k3(logprobs, ref), mask, 640)
    loss.backward()
    grad = logprobs.grad
    assert (grad[mask == 0] == 0).all()  # prompt, tool results, padding, the overlong sequence
    assert (grad[0][mask[0] == 1] != 0).all()  # every token the model wrote in the kept episode
    tool_positions = (mask[0] == 0).nonzero().flatten()
    first_own, last_own = (mask[0] == 1).nonzero().flatten()[[0, -1]]
    assert ((tool_positions > first_own) & (tool_positions < last_own)).any()  # masked tokens between model turns exist


def test_chunked_logprobs_from_the_first_target_match_the_full_computation(tiny_base, chat, tasks):
    """logits_to_keep and chunked log-softmax change nothing where a loss reads (and return 0 before)."""
    policy = load_policy(tiny_base)
    batch = _batch(chat, tasks[:3], [1.0, -1.0, 0.5])
    with torch.no_grad():
        logits = policy(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits[:, :-1].float()
        want = torch.log_softmax(logits, -1).gather(-1, batch.input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
        first = int((batch.loss_mask.sum(0) > 0).float().argmax())
        got, entropy = token_logprobs(policy, batch.input_ids, batch.attention_mask, 1.0, first_target=first, chunk=7)
    assert first > 0
    assert torch.allclose(got[:, first:], want[:, first:], atol=1e-5)
    assert (got[:, :first] == 0).all() and (entropy[:, first:] > 0).all()


def test_micro_batches_make_the_same_update(tiny_base, chat, tasks):
    """Gradient accumulation over micro-batches of one sequence equals one pass over the mini-batch."""
    results = []
    for micro in (None, 1):
        torch.manual_seed(0)
        policy = load_policy(tiny_base)
        reference = load_policy(tiny_base, trainable=False)
        optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-2)
        settings = UpdateSettings(0.1, 0.1, kl_coef=0.1, mini_batches=2, max_grad_norm=1.0, temperature=1.0, ppo_epochs=2, micro_batch_size=micro)
        batch = _batch(chat, tasks[:4], [1.0, -1.0, 0.5, -0.5])
        stats = policy_update(policy, reference, optimizer, batch, settings, torch.Generator().manual_seed(0))
        results.append((stats, [p.detach().clone() for p in policy.parameters()]))
    (whole, w_whole), (micro, w_micro) = results
    for key in ("policy/loss", "policy/kl", "policy/grad_norm", "policy/clip_frac", "policy/entropy"):
        assert micro[key] == pytest.approx(whole[key], rel=1e-4, abs=1e-6), key
    for a, b in zip(w_whole, w_micro):  # relative norm: Adam magnifies summation-order noise in near-zero gradients
        assert (a - b).norm() <= 1e-4 * a.norm()


def test_shared_prompt_runs_once_per_group_with_the_same_logprobs_and_gradients(tiny_base, chat, tasks):
    """Rows that share their prompt (a group's samples) get it computed once; nothing a loss reads changes."""
    examples = [supervised_example(chat, reference_conversation(t)) for t in (tasks[0], tasks[0], tasks[13], tasks[13], tasks[0])]
    cut = [0, 3, 0, 2, 5]  # different answers after one prompt: drop tokens from some rows (right padding)
    batch = collate([ids[: len(ids) - c] for (ids, _), c in zip(examples, cut)], [m[: len(m) - c] for (_, m), c in zip(examples, cut)],
                    [1.0] * 5, chat.pad_id)
    first = int((batch.loss_mask.sum(0) > 0).float().argmax())
    policy = load_policy(tiny_base)
    rows_seen: list[int] = []
    hook = policy.register_forward_pre_hook(lambda _, args, kwargs: rows_seen.append(len(kwargs["input_ids"])), with_kwargs=True)

    def gradients(logprobs: torch.Tensor) -> list[torch.Tensor]:
        policy.zero_grad()
        (logprobs * batch.loss_mask).sum().backward()
        return [p.grad.clone() for p in policy.parameters()]

    shared = token_logprobs(policy, batch.input_ids, batch.attention_mask, 1.0, first_target=first)[0]
    shared_grads = gradients(shared)
    assert rows_seen == [2, 5]  # the two distinct prompts once, then every row's own tokens
    hook.remove()
    logits = policy(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits[:, first:-1].float()
    plain = torch.nn.functional.pad(torch.log_softmax(logits, -1).gather(-1, batch.input_ids[:, first + 1 :, None])[..., 0], (first, 0))
    assert torch.allclose(shared * batch.loss_mask, plain * batch.loss_mask, atol=1e-5)
    for a, b in zip(shared_grads, gradients(plain)):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("micro", [None, 2])
def test_on_policy_update_kl_reads_the_step_s_own_forward(tiny_base, chat, tasks, micro, monkeypatch):
    """One mini-batch, one epoch: "before" comes from the step's forward (rows shuffled, in micro-batches), not a
    pass of its own; policy/update_kl is what a separate forward before the step and one after give."""
    import grpo.update
    from grpo.update import UPDATE_PROBE, update_kl

    torch.manual_seed(0)
    policy = load_policy(tiny_base)
    batch = _batch(chat, tasks[:UPDATE_PROBE + 4], [1.0, -1.0] * ((UPDATE_PROBE + 4) // 2))  # more rows than the probe
    probe = batch.select(slice(0, UPDATE_PROBE))
    with torch.no_grad():
        before = token_logprobs(policy, probe.input_ids, probe.attention_mask)[0]
    passes = []  # the update's no-grad passes over rows (scored), apart from the step's own forwards
    scored = grpo.update.scored
    monkeypatch.setattr(grpo.update, "scored", lambda model, part, *a: passes.append(len(part)) or scored(model, part, *a))
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-2)
    settings = UpdateSettings(0.2, 0.2, 0.0, mini_batches=1, max_grad_norm=1.0, temperature=1.0, micro_batch_size=micro)
    stats = policy_update(policy, None, optimizer, batch, settings, torch.Generator().manual_seed(0))
    with torch.no_grad():
        after = token_logprobs(policy, probe.input_ids, probe.attention_mask)[0]
    assert passes == [UPDATE_PROBE]  # only the probe after the step
    policy.config.attention_dropout = 0.1  # a training forward is no longer an evaluation one: "before" gets its own pass
    passes.clear()
    policy_update(policy, None, optimizer, batch, settings, torch.Generator().manual_seed(0))
    assert passes == [UPDATE_PROBE, UPDATE_PROBE]
    assert stats["policy/update_kl"] > 0
    assert stats["policy/update_kl"] == pytest.approx(update_kl(before, after, probe.loss_mask), rel=1e-4)


def test_length_groups_by_hand():
    """Longest first; a row joins while rows x the group's first (longest) row fit the budget, at most ``size`` rows."""
    from grpo.update import length_groups

    lengths = [5, 9, 3, 9, 2]
    assert length_groups(lengths, None, 20) == [[1, 3], [0, 2, 4]]  # 2 x 9 = 18; 3 x 9 = 27 > 20; then 3 x 5 = 15
    assert length_groups(lengths, 2, 20) == [[1, 3], [0, 2], [4]]
    assert length_groups(lengths, None, 4) == [[1], [3], [0], [2], [4]]  # a row longer than the budget goes alone


def test_micro_batches_by_tokens_make_the_same_update_on_narrower_tensors(tiny_base, chat, tasks, monkeypatch):
    """Sequences of several lengths: micro-batches grouped by length, each padded only to its own longest, give the
    update of whole mini-batches (old and reference log-probs, two epochs of two mini-batches, KL on)."""
    import grpo.update

    by_length = {len(supervised_example(chat, reference_conversation(t))[0]): t for t in tasks}
    batch = _batch(chat, [by_length[n] for n in sorted(by_length)[::-1][:8]], [1.0, -1.0, 0.5, -0.5] * 2)  # 8 lengths
    lengths = batch.attention_mask.sum(1)
    assert len(set(lengths.tolist())) == 8
    results = []
    logprobs = grpo.update.token_logprobs
    for tokens in (None, int(lengths.max()) * 2):
        widths = []
        monkeypatch.setattr(grpo.update, "token_logprobs", lambda model, ids, *a, widths=widths: widths.append(ids.shape) or logprobs(model, ids, *a))
        torch.manual_seed(0)
        policy = load_policy(tiny_base)
        reference = load_policy(tiny_base, trainable=False)
        optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-2)
        settings = UpdateSettings(0.1, 0.1, kl_coef=0.1, mini_batches=2, max_grad_norm=1.0, temperature=1.0, ppo_epochs=2, micro_batch_tokens=tokens)
        stats = policy_update(policy, reference, optimizer, batch, settings, torch.Generator().manual_seed(0))
        results.append((stats, [p.detach().clone() for p in policy.parameters()], widths))
    (whole, w_whole, shapes_whole), (packed, w_packed, shapes_packed) = results
    for key in ("policy/loss", "policy/kl", "policy/grad_norm", "policy/clip_frac", "policy/entropy", "policy/update_kl"):
        assert packed[key] == pytest.approx(whole[key], rel=1e-4, abs=1e-6), key
    for a, b in zip(w_whole, w_packed):
        assert (a - b).norm() <= 1e-4 * a.norm()
    assert {shape[1] for shape in shapes_whole} == {batch.input_ids.shape[1]}
    assert sum(r * w for r, w in shapes_packed) < sum(r * w for r, w in shapes_whole)  # fewer padded positions computed
    assert all(r * w <= int(lengths.max()) * 2 or r == 1 for r, w in shapes_packed)


def test_update_kl_by_hand():
    """KL(before || after) by (r - 1) - log r on the trained tokens: 0 where nothing moved."""
    from grpo.update import update_kl

    before = torch.log(torch.tensor([[0.5, 0.2, 0.9]]))
    after = torch.log(torch.tensor([[0.25, 0.2, 0.1]]))
    mask = torch.tensor([[1, 1, 0]])  # the last token is a tool's: not trained, not counted
    expected = ((0.5 - 1) - math.log(0.5) + 0.0) / 2  # r = 0.5 on the first token, 1 on the second
    assert update_kl(before, after, mask) == pytest.approx(expected)
    assert update_kl(before, before, mask) == 0.0


def test_update_norm_by_hand():
    """One AdamW step from zero moments moves each weight by lr * sign(grad): |Δ| / |θ| worked by hand."""
    from grpo.update import update_norm

    weight = torch.nn.Parameter(torch.tensor([3.0, 4.0]))
    optimizer = torch.optim.AdamW([weight], lr=0.1, weight_decay=0.0)
    weight.grad = torch.tensor([1.0, -2.0])
    optimizer.step()
    assert weight.detach().tolist() == pytest.approx([2.9, 4.1])
    assert update_norm(optimizer) == pytest.approx(math.hypot(0.1, 0.1) / math.hypot(2.9, 4.1), rel=1e-6)


def _loss_of(policy, batch, algorithm: dict):
    """The update's loss and statistics for one mini-batch, with settings built from a trial config."""
    from grpo.algorithm import AGGREGATION_WEIGHTS
    from grpo.config import TrainerConfig
    from grpo.distributed import ONE_PROCESS
    from grpo.update import STAT_NAMES, UpdateSettings, _micro_loss, first_target

    settings = UpdateSettings.of(TrainerConfig.model_validate({"algorithm": {"kl_coef": 0.0, **algorithm}}))
    first = first_target(batch.loss_mask)
    with torch.no_grad():
        logprobs, _ = token_logprobs(policy, batch.input_ids, batch.attention_mask, settings.temperature, first)
    old = logprobs - 0.05 * batch.loss_mask  # the policy has moved up by 0.05 on its own tokens: ratio exp(0.05)
    gap_mask = batch.loss_mask * torch.isfinite(batch.sampler_logprobs)
    totals = (float(AGGREGATION_WEIGHTS[settings.loss_agg](batch.loss_mask)), float(batch.loss_mask.sum()), float(gap_mask.sum()))
    loss, stats, _ = _micro_loss(policy, batch, old, None, settings, ONE_PROCESS, first, totals)
    return settings, loss, dict(zip(STAT_NAMES, stats.tolist())), logprobs, old


@pytest.mark.parametrize("name", ["ppo_clip", "gspo", "cispo"])
def test_algorithm_policy_loss_reaches_the_loss(tiny_base, chat, tasks, name):
    """``algorithm.policy_loss`` and its epsilons, from a config, make the loss the update backpropagates."""
    from grpo.algorithm import POLICY_LOSSES, loss_aggregation

    policy = load_policy(tiny_base)
    batch = _batch(chat, tasks[:2], [1.0, -1.0])
    settings, loss, _, logprobs, old = _loss_of(policy, batch, {"policy_loss": name, "loss_agg": "seq-mean-token-mean"})
    eps = {"ppo_clip": (0.2, 0.2), "gspo": (3e-4, 4e-4), "cispo": (None, 0.28)}[name]
    assert (settings.policy_loss, settings.clip_low, settings.clip_high) == (name, *eps)
    want = POLICY_LOSSES[name](logprobs, old, batch.advantages, batch.loss_mask, *eps).loss
    assert loss.item() == pytest.approx(loss_aggregation("seq-mean-token-mean")(want, batch.loss_mask, 1).item(), rel=1e-5)
    if name == "gspo":  # s = exp(0.05) = 1.0513 is past 1 + 4e-4: the A > 0 sequence is clipped at 1.0004, the A < 0 one is not
        assert loss.item() == pytest.approx((-1.0004 + math.exp(0.05)) / 2, rel=1e-5)
    loss.backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in policy.parameters())


def test_tis_cap_weights_each_token_and_is_reported(tiny_base, chat, tasks):
    """With the sampler 1 nat below the policy on every own token, exp(1) = 2.718 > cap 2: every token is
    truncated, weighs 2, and the token-mean loss doubles."""
    policy = load_policy(tiny_base)
    batch = _batch(chat, tasks[:2], [1.0, -1.0])
    with torch.no_grad():
        logprobs, _ = token_logprobs(policy, batch.input_ids, batch.attention_mask, 1.0, 0)
    own = batch.loss_mask == 1
    batch.sampler_logprobs = torch.where(own, logprobs - 0.05 - 1.0, torch.full_like(logprobs, math.nan))
    _, plain, plain_stats, _, _ = _loss_of(policy, batch, {})
    _, weighted, stats, _, _ = _loss_of(policy, batch, {"tis_cap": 2.0})
    assert weighted.item() == pytest.approx(2.0 * plain.item(), rel=1e-5)
    assert stats["tis_weight_mean"] == pytest.approx(2.0) and stats["tis_truncated_frac"] == pytest.approx(1.0)
    assert plain_stats["tis_weight_mean"] == pytest.approx(math.e, rel=1e-4) and plain_stats["tis_truncated_frac"] == 0.0  # off: measured only


def test_tis_seq_mask_cap_drops_far_off_sequences(tiny_base, chat, tasks):
    """Sequence 0's sampler is 1 nat below the policy (geometric ratio e > cap 2): no policy loss from it,
    while it still counts in seq-mean-token-mean's denominator; sequence 1's sampler agrees."""
    policy = load_policy(tiny_base)
    batch = _batch(chat, tasks[:2], [1.0, 1.0])
    with torch.no_grad():
        logprobs, _ = token_logprobs(policy, batch.input_ids, batch.attention_mask, 1.0, 0)
    own = batch.loss_mask == 1
    shift = torch.tensor([[1.0], [0.0]])
    batch.sampler_logprobs = torch.where(own, logprobs - 0.05 - shift, torch.full_like(logprobs, math.nan))
    algorithm = {"policy_loss": "cispo", "loss_agg": "seq-mean-token-mean"}
    _, plain, _, _, _ = _loss_of(policy, batch, algorithm)
    _, masked, stats, _, _ = _loss_of(policy, batch, {**algorithm, "tis_seq_mask_cap": 2.0})
    only_second = batch.select(slice(1, 2))
    _, second, _, _, _ = _loss_of(policy, only_second, algorithm)
    assert masked.item() == pytest.approx(second.item() / 2, rel=1e-5) and masked.item() != pytest.approx(plain.item())
    tokens = batch.loss_mask.sum(-1)
    assert stats["tis_seq_masked_frac"] == pytest.approx(float(tokens[0] / tokens.sum()))


def test_the_kv_cache_is_passed_by_the_name_the_model_s_forward_reads():
    """transformers renamed ``past_key_values`` to ``cache`` within 5.x (the old name warns, then goes): the shared
    prompt's cache goes by whichever name the model (or a peft model's base) reads."""
    from grpo.policy import cache_argument

    class Old(torch.nn.Module):
        def forward(self, input_ids=None, past_key_values=None, use_cache=None):
            return input_ids

    class New(torch.nn.Module):
        def forward(self, input_ids=None, cache=None, use_cache=None):
            return input_ids

    class Wrapped(torch.nn.Module):  # peft's shape: forward(**kwargs) around the model
        def __init__(self, base):
            super().__init__()
            self.base = base

        def forward(self, **kwargs):
            return self.base(**kwargs)

    class Off:  # a LoRA policy's reference (grpo.lora.AdapterOff): no module of its own, the policy's modules
        def __init__(self, policy):
            self.policy = policy

        def modules(self):
            return self.policy.modules()

    models = (Old(), New(), Wrapped(Old()), Wrapped(New()), Off(Wrapped(New())))
    assert [cache_argument(m) for m in models] == ["past_key_values", "cache", "past_key_values", "cache", "cache"]
