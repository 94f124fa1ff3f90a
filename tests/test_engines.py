"""The rollout-engine interface and its transformers engine (vLLM's tests: tests_vllm/)."""

from __future__ import annotations

import sys

import pytest
import torch

from baselines.config import load_config
from baselines.engines import (
    Generation,
    HFEngine,
    RolloutEngine,
    VLLMEngine,
    logprob_diff,
    make_engine,
    recompute_logprobs,
)
from baselines.policy import load_policy
from baselines.rollout import SamplingSettings, collect_rollouts, generate, render_prompt
from baselines.trainer import vocabulary_texts

ENV = "agentgym/Sokoban-v0"


@pytest.fixture(scope="module")
def tiny():
    return load_policy("tiny", texts=vocabulary_texts(ENV, {}, range(16)), seed=0)


def _prompts(tokenizer, seeds=(0, 1, 2)) -> list[str]:
    import gymnasium

    env = gymnasium.make(ENV)
    out = []
    for seed in seeds:
        obs, info = env.reset(seed=seed)
        messages = [
            {"role": "system", "content": info["instructions"]},
            {"role": "user", "content": obs},
        ]
        out.append(render_prompt(tokenizer, messages, think_prefix=True))
    return out


def test_hf_engine_returns_what_generate_returns(tiny) -> None:
    model, tokenizer = tiny
    sampling = SamplingSettings(max_new_tokens=6, temperature=1.0)
    prompts = _prompts(tokenizer)
    torch.manual_seed(5)
    expected = generate(model, tokenizer, prompts, sampling)
    torch.manual_seed(5)
    engine = HFEngine(model, tokenizer)
    assert isinstance(engine, RolloutEngine)
    got = engine.generate(prompts, sampling)
    assert [(g.token_ids, g.ended_with_eos) for g in got] == expected
    assert [g.text for g in got] == [tokenizer.decode(ids) for ids, _ in expected]
    assert all(g.logprobs == [] for g in got)  # not asked for


def test_hf_engine_logprobs_match_one_sequence_at_a_time_and_greedy_is_the_argmax(tiny) -> None:
    model, tokenizer = tiny
    sampling = SamplingSettings(max_new_tokens=5, temperature=0.0, stop_strings=())
    prompts = _prompts(tokenizer, seeds=(3, 4))
    got = HFEngine(model, tokenizer, logprobs=True).generate(prompts, sampling)
    for prompt, gen in zip(prompts, got, strict=True):
        assert len(gen.logprobs) == len(gen.token_ids) > 0
        # Independent: one unpadded sequence, logits of each position by hand.
        ids = tokenizer(prompt, add_special_tokens=False)["input_ids"] + gen.token_ids
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids])).logits[0].float()
        logp = torch.log_softmax(logits, dim=-1)
        start = len(ids) - len(gen.token_ids) - 1
        for k, (token, lp) in enumerate(zip(gen.token_ids, gen.logprobs, strict=True)):
            assert lp == pytest.approx(logp[start + k, token].item(), abs=1e-5)
            assert lp == pytest.approx(logp[start + k].max().item(), abs=1e-5)  # greedy


def test_collect_rollouts_with_an_explicit_hf_engine_equals_the_default(tiny) -> None:
    model, tokenizer = tiny
    sampling = SamplingSettings(max_new_tokens=4)
    runs = []
    for engine in (None, HFEngine(model, tokenizer)):
        torch.manual_seed(9)
        episodes = collect_rollouts(
            model, tokenizer, ENV, [0, 1], 2, sampling, env_kwargs={"max_turns": 2}, engine=engine
        )
        runs.append([[(t.response, t.generated_ids, t.reward) for t in e.turns] for e in episodes])
    assert runs[0] == runs[1]


def test_recompute_logprobs_handles_empty_replies_and_batches(tiny) -> None:
    model, tokenizer = tiny
    prompts = _prompts(tokenizer)
    ids = [[5, 6, 7], [], [8]]
    batched = recompute_logprobs(model, tokenizer, prompts, ids, batch_size=2)
    single = [
        recompute_logprobs(model, tokenizer, [p], [i])[0] for p, i in zip(prompts, ids, strict=True)
    ]
    assert [len(x) for x in batched] == [3, 0, 1]
    for a, b in zip(batched, single, strict=True):
        assert a == pytest.approx(b, abs=1e-5)


def test_logprob_diff_by_hand() -> None:
    stats = logprob_diff([[-1.0, -2.0], [-0.5]], [[-1.5, -2.0], [-0.25]])
    assert stats["rollout/logprob_diff_max"] == pytest.approx(0.5)
    assert stats["rollout/logprob_diff_mean"] == pytest.approx(0.75 / 3)
    assert logprob_diff([[]], [[]]) == {}
    with pytest.raises(ValueError, match="length"):
        logprob_diff([[-1.0]], [[]])


def test_engine_selection_and_its_errors(tiny, monkeypatch) -> None:
    model, tokenizer = tiny
    assert make_engine("hf", model, tokenizer).name == "hf"
    with pytest.raises(ValueError, match="rollout.engine"):
        make_engine("sglang", model, tokenizer)
    monkeypatch.setitem(sys.modules, "vllm", None)  # as if vLLM were not installed
    with pytest.raises(ImportError, match="docs/engines.md"):
        VLLMEngine(model, tokenizer)
    assert Generation([1], "a").logprobs == [] and not Generation([1], "a").ended_with_eos


def test_config_engine_field() -> None:
    assert load_config(None, []).rollout.engine == "hf"
    assert load_config(None, ["rollout.engine=vllm"]).rollout.engine == "vllm"
    with pytest.raises(ValueError, match=r"rollout.engine: must be one of \['hf', 'vllm'\]"):
        load_config(None, ["rollout.engine=tgi"])
    with pytest.raises(ValueError, match="model.lora_rank=0"):
        load_config(None, ["rollout.engine=vllm", "model.lora_rank=4"])
    with pytest.raises(ValueError, match="rollout.ray_workers: must be >= 0"):
        load_config(None, ["rollout.ray_workers=-1"])
