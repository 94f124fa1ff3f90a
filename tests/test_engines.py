"""The rollout-engine interface and its transformers engine (vLLM's tests: tests_vllm/)."""

from __future__ import annotations

import os
import sys

import pytest
import torch

from baselines.config import load_config
from baselines.episodes import collect_rollouts, vocabulary_texts
from baselines.llm.engines import (
    Generation,
    HFEngine,
    PrefixCache,
    RolloutEngine,
    SamplingSettings,
    VLLMEngine,
    end_token_ids,
    generate,
    logprob_diff,
    make_engine,
    recompute_logprobs,
    vllm_available,
)
from baselines.llm.engines.hf import MIN_SHARED_PREFIX, _top_p_filter
from baselines.llm.policy import load_policy
from tests.helpers import first_prompt_ids

ENV = "agentgym/Sokoban-v0"


@pytest.fixture(scope="module")
def tiny():
    return load_policy("tiny", texts=vocabulary_texts(ENV, {}, range(16)), seed=0)


def _prompts(tokenizer, seeds=(0, 1, 2)) -> list[list[int]]:
    return first_prompt_ids(tokenizer, [(ENV, seeds)])


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
    # The engine decodes on its own attention (baselines.llm.attention): the same ids, the
    # log-probs to float rounding.
    assert [(g.sampled_ids, g.text, g.ended_with_eos) for g in got] == [
        (e.sampled_ids, e.text, e.ended_with_eos) for e in expected
    ]
    for g, e in zip(got, expected, strict=True):
        assert g.logprobs == pytest.approx(e.logprobs, abs=1e-5)
    for g in got:
        assert len(g.logprobs) == len(g.sampled_ids) > 0
        assert g.text == tokenizer.decode(g.reply_ids)


def _by_hand(model, prompt: list[int], sampled: list[int], temperature: float) -> list[float]:
    """Independent: one unpadded sequence, log_softmax(logits / T) of each sampled token."""
    ids = list(prompt) + list(sampled)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0].float()
    logp = torch.log_softmax(logits / temperature, dim=-1)
    start = len(prompt) - 1
    return [logp[start + k, token].item() for k, token in enumerate(sampled)]


def _assert_scored_afresh(model, prompts, generations, temperature: float) -> None:
    """Each generation's log-probs equal its whole sequence scored afresh (:func:`_by_hand`)."""
    for prompt, gen in zip(prompts, generations, strict=True):
        assert gen.logprobs == pytest.approx(
            _by_hand(model, prompt, gen.sampled_ids, temperature), abs=1e-5
        )


def test_hf_engine_logprobs_match_one_sequence_at_a_time_and_greedy_is_the_argmax(tiny) -> None:
    model, tokenizer = tiny
    sampling = SamplingSettings(max_new_tokens=5, temperature=0.0, stop_strings=())
    prompts = _prompts(tokenizer, seeds=(3, 4))
    got = HFEngine(model, tokenizer).generate(prompts, sampling)
    for prompt, gen in zip(prompts, got, strict=True):
        assert len(gen.logprobs) == len(gen.sampled_ids) > 0
        assert gen.logprobs == pytest.approx(
            _by_hand(model, prompt, gen.sampled_ids, 1.0), abs=1e-5
        )
        ids = list(prompt) + gen.sampled_ids
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids])).logits[0]
        start = len(prompt) - 1
        for k, token in enumerate(gen.sampled_ids):
            assert token == int(logits[start + k].argmax())  # greedy


def test_sampling_logprobs_are_of_the_tempered_distribution(tiny) -> None:
    """At T=0.7 the engine reports log_softmax(logits / 0.7), not of the raw logits."""
    model, tokenizer = tiny
    sampling = SamplingSettings(max_new_tokens=6, temperature=0.7, stop_strings=())
    prompts = _prompts(tokenizer, seeds=(5, 6))
    torch.manual_seed(2)
    got = HFEngine(model, tokenizer).generate(prompts, sampling)
    for prompt, gen in zip(prompts, got, strict=True):
        tempered = _by_hand(model, prompt, gen.sampled_ids, 0.7)
        raw = _by_hand(model, prompt, gen.sampled_ids, 1.0)
        assert gen.logprobs == pytest.approx(tempered, abs=1e-5)
        assert max(abs(a - b) for a, b in zip(gen.logprobs, raw, strict=True)) > 1e-3
        again = recompute_logprobs(model, [prompt], [gen.sampled_ids], temperature=0.7)[0]
        assert again == pytest.approx(tempered, abs=1e-5)


def test_the_end_token_is_kept_whatever_the_tokenizer_calls_eos(tiny) -> None:
    """Make a token of a sampled reply (the first one that is new at k >= 1) an end token, as a
    checkpoint whose EOS is not the template's end of turn: the reply stops there, keeps it, and
    reports ended."""
    model, tokenizer = tiny
    sampling = SamplingSettings(max_new_tokens=8, temperature=1.0, stop_strings=())
    prompts = _prompts(tokenizer, seeds=(7,))
    torch.manual_seed(11)
    free = HFEngine(model, tokenizer).generate(prompts, sampling)[0]
    assert len(free.sampled_ids) == 8 and not free.ended_with_eos
    k = next(k for k in range(1, 8) if free.sampled_ids[k] not in free.sampled_ids[:k])
    end = free.sampled_ids[k]
    saved = model.generation_config.eos_token_id
    model.generation_config.eos_token_id = [saved, end]
    try:
        assert end_token_ids(model, tokenizer) >= {end, tokenizer.eos_token_id}
        torch.manual_seed(11)  # the same draws: the same tokens up to the new end token
        cut = HFEngine(model, tokenizer).generate(prompts, sampling)[0]
    finally:
        model.generation_config.eos_token_id = saved
    assert cut.sampled_ids == free.sampled_ids[: k + 1] and cut.ended_with_eos
    assert cut.reply_ids == free.sampled_ids[:k]
    assert cut.logprobs == pytest.approx(free.logprobs[: k + 1], abs=1e-5)
    assert cut.text == tokenizer.decode(free.sampled_ids[:k])


def test_collect_rollouts_with_an_explicit_hf_engine_equals_the_default(tiny) -> None:
    model, tokenizer = tiny
    sampling = SamplingSettings(max_new_tokens=4)
    runs = []
    for engine in (None, HFEngine(model, tokenizer)):
        torch.manual_seed(9)
        episodes = collect_rollouts(
            model, tokenizer, ENV, [0, 1], 2, sampling, env_kwargs={"max_turns": 2}, engine=engine
        )
        runs.append(
            [[(t.action, t.sample.sampled_ids, t.reward) for t in e.turns] for e in episodes]
        )
    assert runs[0] == runs[1]


def test_kv_cache_across_turns_gives_what_a_full_prefill_gives(tiny) -> None:
    """Five Sokoban turns, greedy: with keys/values reused across turns the prompts, the sampled
    ids and (to float rounding) the log-probs are those of ``model.generate`` prefilling every
    prompt in full; from turn 2 on every prompt extends its episode's cached prefix."""
    model, tokenizer = tiny
    sampling = SamplingSettings(max_new_tokens=10, temperature=0.0)
    runs, engines = [], [HFEngine(model, tokenizer, kv_cache=False), HFEngine(model, tokenizer)]
    hits = []
    for engine in engines:
        if engine.cache is not None:  # count what the batch reused before it is released
            real = engine.generate

            def counting(prompts, settings, real=real, engine=engine):
                out = real(prompts, settings)
                hits.append((engine.cache.hits, engine.cache.reused_tokens, len(prompts)))
                return out

            engine.generate = counting
        runs.append(collect_rollouts(model, tokenizer, ENV, [0, 1], 2, sampling, engine=engine))
    full, cached = runs
    turns = [len(e.turns) for e in full]
    assert turns == [len(e.turns) for e in cached] and min(turns) >= 3
    for a, b in zip(full, cached, strict=True):
        for ta, tb in zip(a.turns, b.turns, strict=True):
            assert (
                ta.sample.prompt_ids == tb.sample.prompt_ids
                and ta.sample.sampled_ids == tb.sample.sampled_ids
            )
            assert tb.sample.logprobs == pytest.approx(ta.sample.logprobs, abs=1e-5)
    # Turn 1: nothing cached; turn k > 1: one hit per live episode, reusing its whole last turn.
    assert hits[0] == (0, 0, 4)
    assert [h[0] for h in hits] == [sum(min(n, k) for n in turns) - 4 for k in range(1, 6)][
        : len(hits)
    ]
    assert all(b[1] > a[1] for a, b in zip(hits, hits[1:], strict=False))
    assert engines[1].cache.entries == []  # released when the batch ended


def test_kv_cache_sampling_logprobs_and_weight_changes(tiny) -> None:
    """At T=0.7 on a cached prefix the engine's log-probs are those of the whole sequence scored
    afresh; an optimizer step (in-place, bumping the parameters' versions) empties the cache."""
    import copy

    model, tokenizer = tiny
    model = copy.deepcopy(model)
    engine = HFEngine(model, tokenizer)
    sampling = SamplingSettings(max_new_tokens=6, temperature=0.7, stop_strings=())
    prompts = _prompts(tokenizer, seeds=(7, 8))
    torch.manual_seed(3)
    first = engine.generate(prompts, sampling)
    follow = [p + g.sampled_ids + p[-5:] for p, g in zip(prompts, first, strict=True)]
    second = engine.generate(follow, sampling)
    assert engine.cache.hits == 2 and engine.cache.reused_tokens >= sum(map(len, prompts))
    _assert_scored_afresh(model, follow, second, 0.7)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(input_ids=torch.tensor([prompts[0]])).logits.sum().backward()
    optimizer.step()
    last = [f + g.sampled_ids + f[-3:] for f, g in zip(follow, second, strict=True)]
    third = engine.generate(last, sampling)
    assert engine.cache.hits == 2  # nothing reused from before the step
    _assert_scored_afresh(model, last, third, 0.7)


def test_kv_cache_of_a_row_that_stopped_before_the_others(tiny) -> None:
    """Seed 1 samples "___ L it ..." for the first prompt and no "it" for the others, so with the
    stop string "it" row 0 stops after 3 tokens while rows 1-2 run to 8. Row 0's last token was
    never fed (a pad was, in its column), so its keys/values must not be reused: on the next turn
    every row's log-probs equal those of its whole sequence scored afresh."""
    model, tokenizer = tiny
    prompts = _prompts(tokenizer, seeds=(7, 8, 9))
    engine = HFEngine(model, tokenizer)
    torch.manual_seed(1)
    first = engine.generate(prompts, SamplingSettings(max_new_tokens=8, stop_strings=("it",)))
    assert [len(g.sampled_ids) for g in first] == [3, 8, 8] and first[0].text.endswith("it")
    follow = [p + g.sampled_ids + p[-4:] for p, g in zip(prompts, first, strict=True)]
    second = engine.generate(follow, SamplingSettings(max_new_tokens=6, stop_strings=()))
    assert engine.cache.hits == 3
    _assert_scored_afresh(model, follow, second, 1.0)


def test_kv_cache_bound_drops_entries_and_the_dropped_episode_is_prefilled_in_full(tiny) -> None:
    """Two prompts; the store's bound is the first entry's size plus one byte, so the second
    row's keys/values are not kept (``dropped``). On the next turn only the first row reuses its
    prefix (one hit), the second is prefilled in full, and both rows' log-probs still equal
    their whole sequences scored afresh."""
    model, tokenizer = tiny
    prompts = _prompts(tokenizer, seeds=(7, 8))
    sampling = SamplingSettings(max_new_tokens=6, temperature=0.7, stop_strings=())
    free = HFEngine(model, tokenizer)
    torch.manual_seed(3)
    free.generate(prompts, sampling)
    first_size = sum(k.nbytes + v.nbytes for k, v in free.cache.entries[0][1])
    assert free.cache.nbytes() > first_size > 0
    engine = HFEngine(model, tokenizer, kv_cache_bytes=first_size + 1)
    torch.manual_seed(3)
    first = engine.generate(prompts, sampling)
    assert engine.cache.dropped == 1 and len(engine.cache.entries) == 1
    assert engine.cache.nbytes() == first_size
    follow = [p + g.sampled_ids + p[-5:] for p, g in zip(prompts, first, strict=True)]
    second = engine.generate(follow, sampling)
    assert engine.cache.hits == 1
    assert engine.cache.reused_tokens == len(prompts[0]) + len(first[0].sampled_ids) - 1
    _assert_scored_afresh(model, follow, second, 0.7)


def test_kv_cache_is_stored_in_the_autocast_dtype(tiny) -> None:
    """Under bf16 autocast the stored keys (float32 after the rotary embedding) and values are
    bf16: attention casts them to bf16 anyway, so the next turn's log-probs equal those of a
    full prefill under the same autocast (rounding of bf16 matmuls over other shapes aside)."""
    model, tokenizer = tiny
    prompts = _prompts(tokenizer, seeds=(7, 8))
    sampling = SamplingSettings(max_new_tokens=6, temperature=0.7, stop_strings=())
    engine = HFEngine(model, tokenizer)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        torch.manual_seed(3)
        first = engine.generate(prompts, sampling)
        assert {k.dtype for _, kv in engine.cache.entries for k, v in kv} == {torch.bfloat16}
        assert {v.dtype for _, kv in engine.cache.entries for k, v in kv} == {torch.bfloat16}
        # the decoding cache's, which holds float32 keys in the autocast dtype too
        assert engine.cache.cache_dtypes == (torch.bfloat16, torch.bfloat16)
        follow = [p + g.sampled_ids + p[-5:] for p, g in zip(prompts, first, strict=True)]
        second = engine.generate(follow, sampling)
        assert engine.cache.hits == 2
        for prompt, gen in zip(follow, second, strict=True):
            ids = torch.tensor([list(prompt) + gen.sampled_ids])
            with torch.no_grad():
                logits = model(input_ids=ids).logits[0].float()
            logp = torch.log_softmax(logits / 0.7, dim=-1)
            start = len(prompt) - 1
            expected = [logp[start + k, t].item() for k, t in enumerate(gen.sampled_ids)]
            assert gen.logprobs == pytest.approx(expected, abs=0.05)


def test_top_p_filter_by_hand() -> None:
    """Probabilities (0.5, 0.3, 0.2): top-p 0.7 keeps 0.5 and 0.3 (0.5 + 0.3 >= 0.7); top-p 0.5
    keeps 0.5 alone; top-p 1 keeps all."""
    scores = torch.log(torch.tensor([[0.2, 0.5, 0.3]]))
    kept = lambda p: torch.isfinite(_top_p_filter(scores, p))[0].tolist()  # noqa: E731
    assert kept(0.7) == [False, True, True]
    assert kept(0.5) == [False, True, False]
    assert kept(1.0) == [True, True, True]
    assert PrefixCache().lookup([1, 2, 3]) == -1


def test_recompute_logprobs_handles_empty_replies_and_batches(tiny) -> None:
    model, tokenizer = tiny
    prompts = _prompts(tokenizer)
    ids = [[5, 6, 7], [], [8]]
    batched = recompute_logprobs(model, prompts, ids, batch_size=2)
    single = [recompute_logprobs(model, [p], [i])[0] for p, i in zip(prompts, ids, strict=True)]
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
    # "auto": vLLM when importable, else transformers (this venv has no vLLM).
    assert make_engine("auto", model, tokenizer).name == ("vllm" if vllm_available() else "hf")
    assert Generation([1], "a").logprobs == [] and not Generation([1], "a").ended_with_eos


def test_config_engine_field() -> None:
    assert load_config(None, []).rollout.engine == "auto"
    assert load_config(None, ["rollout.engine=vllm"]).rollout.engine == "vllm"
    with pytest.raises(
        ValueError, match=r"rollout.engine: must be one of \['auto', 'hf', 'vllm'\]"
    ):
        load_config(None, ["rollout.engine=tgi"])
    with pytest.raises(ValueError, match="model.lora_rank=0"):
        load_config(None, ["rollout.engine=vllm", "model.lora_rank=4"])
    with pytest.raises(ValueError, match="rollout.ray_workers: must be >= 0"):
        load_config(None, ["rollout.ray_workers=-1"])


def test_decoding_in_token_bounded_batches_gives_the_same_greedy_episodes(tiny) -> None:
    """Greedy Sokoban episodes with the live episodes decoded 1 or 2 at a time (a small
    max_batch_tokens) equal those decoded all at once: ids, prompts, and log-probs to float
    rounding; the batches obey the bound, and the stored keys/values are released at the end."""
    model, tokenizer = tiny
    sampling = SamplingSettings(max_new_tokens=6, temperature=0.0)
    whole = HFEngine(model, tokenizer)
    bounded = HFEngine(model, tokenizer, max_batch_tokens=1)  # one row per batch
    sizes = []
    real = bounded.chunks

    def spy(prompts, new):
        out = real(prompts, new)
        sizes.append([len(c) for c in out])
        return out

    bounded.chunks = spy
    runs = [
        collect_rollouts(model, tokenizer, ENV, [0, 1], 2, sampling, engine=engine)
        for engine in (whole, bounded)
    ]
    for a, b in zip(*runs, strict=True):
        assert len(a.turns) == len(b.turns)
        for ta, tb in zip(a.turns, b.turns, strict=True):
            assert (
                ta.sample.prompt_ids == tb.sample.prompt_ids
                and ta.sample.sampled_ids == tb.sample.sampled_ids
            )
            assert tb.sample.logprobs == pytest.approx(ta.sample.logprobs, abs=1e-5)
    assert sizes and all(set(s) == {1} for s in sizes)
    assert bounded.cache.entries == []
    # The packing rule by hand: budget 30, new tokens 5: [10, 12] -> 2 x 17 = 34 > 30: apart;
    # [3, 4, 20] -> 2 x 9 = 18 fits, 3 x 25 = 75 does not.
    rule = HFEngine(model, tokenizer, max_batch_tokens=30)
    assert rule.chunks([[0] * 10, [0] * 12], 5) == [[0], [1]]
    assert rule.chunks([[0] * 3, [0] * 4, [0] * 20], 5) == [[0, 1], [2]]


def test_chunked_prefill_gives_the_episodes_of_a_whole_prefill(tiny) -> None:
    """Sokoban episodes (3 rows of unequal prompts: left padding, cached prefixes from turn 2 on)
    with the prompts prefilled one column a forward (``prefill_chunk_tokens=1``) and 7 tokens a
    forward (2 columns over 3 rows, 3 over 2) sample what a whole prefill samples, T = 0.7 with one seeded
    generator per row: the same prompt and sampled ids, log-probs to float rounding; every turn's
    log-probs equal the whole sequence scored afresh and unpadded (``_by_hand``). A forward hook
    counts the columns of each prefill forward, so the chunking is seen to happen."""
    from baselines.episodes import episode_generators

    model, tokenizer = tiny
    sampling = SamplingSettings(max_new_tokens=6, temperature=0.7, stop_strings=())
    shapes: dict[int, list[tuple[int, int]]] = {0: [], 1: [], 7: []}
    runs = {}
    for chunk, seen in shapes.items():

        def hook(_module, args, kwargs, seen=seen):
            ids = kwargs.get("input_ids", args[0] if args else None)
            if ids.shape[1] > 1:  # a prefill forward (decoding feeds one column)
                seen.append(tuple(ids.shape))

        handle = model.register_forward_pre_hook(hook, with_kwargs=True)
        try:
            engine = HFEngine(model, tokenizer, prefill_chunk_tokens=chunk)
            generators = episode_generators(11, 0, 3, range(3), 1)
            runs[chunk] = collect_rollouts(
                model, tokenizer, ENV, [0, 1, 2], 1, sampling, engine=engine, generators=generators
            )
            assert engine.cache.hits > 0  # later turns reused their prefixes
        finally:
            handle.remove()
    assert shapes[1] == [] and max(cols for _, cols in shapes[0]) > 7
    assert shapes[7] and all(cols <= max(1, 7 // rows) for rows, cols in shapes[7])
    assert (3, 2) in shapes[7] and len(shapes[7]) > len(shapes[0])
    for chunk in (1, 7):
        for a, b in zip(runs[0], runs[chunk], strict=True):
            assert len(a.turns) == len(b.turns) > 1
            for ta, tb in zip(a.turns, b.turns, strict=True):
                assert ta.sample.prompt_ids == tb.sample.prompt_ids
                assert ta.sample.sampled_ids == tb.sample.sampled_ids
                assert tb.sample.logprobs == pytest.approx(ta.sample.logprobs, abs=1e-5)
                assert tb.sample.logprobs == pytest.approx(
                    _by_hand(model, tb.sample.prompt_ids, tb.sample.sampled_ids, 0.7), abs=1e-5
                )
    with pytest.raises(ValueError, match="prefill_chunk_tokens must be >= 0"):
        from baselines.llm.engines import generate_cached

        generate_cached(model, tokenizer, [[1, 2]], sampling, prefill_chunk_tokens=-1)
    with pytest.raises(ValueError, match="rollout.prefill_chunk_tokens: must be >= 0"):
        load_config(None, ["rollout.prefill_chunk_tokens=-1"])


def test_the_decoding_cache_holds_the_autocast_dtype_and_loses_nothing(tiny, monkeypatch) -> None:
    """Under bf16 autocast the decoding batch's reserved buffers hold the keys (float32 after the
    rotary embedding) in bf16, and the replies (T = 0.7, one seeded generator per row) are
    exactly those decoded with float32 buffers: attention casts the keys to bf16 either way."""
    from baselines.llm.engines import hf as engines

    model, tokenizer = tiny
    prompts = _prompts(tokenizer, seeds=(7, 8))
    sampling = SamplingSettings(max_new_tokens=6, temperature=0.7, stop_strings=())
    real = engines._decoding_cache
    made = []

    def run(keep_float32: bool):
        def cache_for(m, capacity):
            cache = real(m, capacity)
            if keep_float32:
                for layer in cache.layers:
                    layer.low = None
            made.append(cache)
            return cache

        monkeypatch.setattr(engines, "_decoding_cache", cache_for)
        generators = [torch.Generator().manual_seed(i) for i in range(len(prompts))]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return engines.generate_cached(model, tokenizer, prompts, sampling, None, generators)

    low, full = run(False), run(True)
    assert [c.layers[0].keys.dtype for c in made] == [torch.bfloat16, torch.float32]
    assert [g.sampled_ids for g in low] == [g.sampled_ids for g in full]
    assert [g.logprobs for g in low] == [g.logprobs for g in full]
    with torch.no_grad():
        outside = real(model, 8)  # no autocast: float32 stays float32
    assert outside.layers[0].low is None


def test_the_config_default_of_chunked_prefill_is_the_engines() -> None:
    from baselines.config import RolloutConfig
    from baselines.llm.engines import PREFILL_CHUNK_TOKENS

    assert RolloutConfig().prefill_chunk_tokens == PREFILL_CHUNK_TOKENS == 2048


def test_reserved_cache_layer_equals_concatenation_and_grows_past_its_capacity(tiny) -> None:
    """The decoding cache's in-place layer: chunks of 3, 1 and 2 positions (capacity 4, so the
    last write doubles the buffer) read back as torch.cat of the chunks, as DynamicLayer's."""
    from baselines.llm.engines.hf import _decoding_cache

    model, _ = tiny
    cache = _decoding_cache(model, 4)
    layer = cache.layers[0]
    assert (
        type(layer).__name__ == "ReservedLayer"
        and len(cache.layers) == model.config.num_hidden_layers
    )
    g = torch.Generator().manual_seed(0)
    chunks = [
        (torch.randn(2, 3, n, 8, generator=g), torch.randn(2, 3, n, 8, generator=g))
        for n in (3, 1, 2)
    ]
    for k, v in chunks:
        keys, values = layer.update(k, v)
    assert torch.equal(keys, torch.cat([k for k, _ in chunks], dim=2))
    assert torch.equal(values, torch.cat([v for _, v in chunks], dim=2))
    assert layer.get_seq_length() == 6 and layer.filled == 6


def _assert_each_as_if_alone(model, tokenizer, prompts, sampling, batch, gens) -> None:
    """Row r of ``batch`` has the ids and log-probs of prompt r decoded alone with ``gens([r])``."""
    for r, prompt in enumerate(prompts):
        alone = HFEngine(model, tokenizer).generate([prompt], sampling, generators=gens([r]))
        assert alone[0].sampled_ids == batch[r].sampled_ids
        assert alone[0].logprobs == pytest.approx(batch[r].logprobs, abs=1e-5)


def test_rows_that_are_done_leave_the_decoding_batch_and_their_keys_are_kept(tiny) -> None:
    """Stop string "o", one generator per row (seeds 0-3): rows 3 and 2 stop after 3 and 5 of the
    10 tokens (found by running it). Once a quarter of the batch is done the done rows leave it:
    the decoding forwards go 4 -> 3 -> 2 rows. Every row's ids and log-probs are those of the row
    decoded alone, and on the next turn every row (those that left early included) reuses its
    stored prefix, with log-probs of its whole sequence scored afresh."""
    model, tokenizer = tiny
    prompts = _prompts(tokenizer, seeds=(7, 8, 9, 10))
    sampling = SamplingSettings(max_new_tokens=10, temperature=1.0, stop_strings=("o",))

    def gens(rows=range(4)):
        return [torch.Generator().manual_seed(r) for r in rows]

    rows_seen: list[int] = []
    hook = model.register_forward_pre_hook(
        lambda module, args, kwargs: rows_seen.append(kwargs["input_ids"].shape[0]),
        with_kwargs=True,
    )
    try:
        engine = HFEngine(model, tokenizer)
        batch = engine.generate(prompts, sampling, generators=gens())
    finally:
        hook.remove()
    assert [len(g.sampled_ids) for g in batch] == [10, 10, 5, 3]
    # First the 4 prompts' shared instructions, once (one row), then the batch.
    assert rows_seen[:2] == [1, 4] and rows_seen[-1] == 2 and sorted(set(rows_seen)) == [1, 2, 3, 4]
    _assert_each_as_if_alone(model, tokenizer, prompts, sampling, batch, gens)
    follow = [p + g.sampled_ids + p[-4:] for p, g in zip(prompts, batch, strict=True)]
    second = engine.generate(follow, SamplingSettings(max_new_tokens=6, stop_strings=()))
    assert engine.cache.hits == 4
    _assert_scored_afresh(model, follow, second, 1.0)


def test_rows_with_one_prompt_are_prefilled_once_and_sample_as_if_alone(tiny) -> None:
    """A group's first turn: rows 0, 2 and 3 share a prompt (Sokoban seed 7), row 1 has its own
    (seed 8); both begin with the same instructions (n tokens: their common prefix, by
    ``os.path.commonprefix``). Prefill in chunks of 16 tokens: the n shared tokens once, as one
    row, then the rest of the 2 distinct prompts as 2 rows, not 4. The store counts the tokens
    prefilled (n + the two remainders) and those shared (every other prompt token). Every row's
    ids and log-probs are those of the row decoded alone with its own generator; the next turn
    reuses every row's own stored prefix."""
    model, tokenizer = tiny
    a, b = _prompts(tokenizer, seeds=(7, 8))
    prompts = [a, b, a, a]
    n = min(len(os.path.commonprefix([a, b])), len(a) - 1, len(b) - 1)
    assert n >= MIN_SHARED_PREFIX
    sampling = SamplingSettings(max_new_tokens=8, temperature=1.0, stop_strings=())

    def gens(rows=range(4)):
        return [torch.Generator().manual_seed(50 + r) for r in rows]

    shapes: list[tuple[int, int]] = []
    hook = model.register_forward_pre_hook(
        lambda module, args, kwargs: shapes.append(tuple(kwargs["input_ids"].shape)),
        with_kwargs=True,
    )
    try:
        engine = HFEngine(model, tokenizer, prefill_chunk_tokens=16)
        batch = engine.generate(prompts, sampling, generators=gens())
    finally:
        hook.remove()
    # The decoding steps are 4-row forwards of one column (no row stops before 8 tokens).
    assert sum(columns for rows, columns in shapes if rows == 1) == n
    assert sum(columns for rows, columns in shapes if rows == 2) == max(len(a), len(b)) - n
    assert [shape for shape in shapes if shape[0] not in (1, 2)] == [(4, 1)] * 7
    assert engine.cache.prefilled_tokens == len(a) + len(b) - n
    assert engine.cache.shared_tokens == 2 * len(a) + n  # all 4 prompts less those prefilled
    assert len({tuple(g.sampled_ids) for g in batch[::2] + batch[3:]}) > 1  # rows diverge
    _assert_each_as_if_alone(model, tokenizer, prompts, sampling, batch, gens)
    follow = [p + g.sampled_ids + p[-4:] for p, g in zip(prompts, batch, strict=True)]
    second = engine.generate(follow, SamplingSettings(max_new_tokens=4, stop_strings=()))
    assert engine.cache.hits == 4 and engine.cache.shared_tokens == 2 * len(a) + n
    _assert_scored_afresh(model, follow, second, 1.0)


def test_packed_grouped_query_attention_equals_transformers_sdpa(tiny, monkeypatch) -> None:
    """A decoding step: transformers calls SDPA (with ``enable_gqa=True`` when no row is padded:
    it drops the all-ones mask; slow on the CPU, baselines.llm.attention); switched, the step is
    two matmuls on the packed heads (no SDPA call), and the logits equal transformers' own
    path's (float32), padded batch or not; the prefill is transformers' path in both."""
    import copy

    from baselines.llm.attention import ATTENTION, use_packed_gqa

    model, _ = tiny
    model = copy.deepcopy(model)
    model.set_attn_implementation("sdpa")
    assert model.config.num_attention_heads > model.config.num_key_value_heads  # 4 on 2
    real = torch.nn.functional.scaled_dot_product_attention
    calls: list[bool] = []

    def spy(query, *args, **kwargs):
        calls.append(bool(kwargs.get("enable_gqa", False)))
        return real(query, *args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    ids = torch.randint(5, 60, (3, 9), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[1, :3] = 0  # row 1 left-padded by 3

    def decode_step(padded: bool) -> torch.Tensor:
        m = mask if padded else torch.ones_like(ids)
        with torch.no_grad():
            out = model(input_ids=ids[:, :8], attention_mask=m[:, :8], use_cache=True)
            assert calls  # the prefill: transformers' SDPA
            calls.clear()
            step = model(input_ids=ids[:, 8:], attention_mask=m, cache=out.past_key_values)
            return step.logits[:, -1]

    expected = {False: decode_step(False)}
    assert calls and all(calls)  # unpadded: enable_gqa, as the module says
    expected[True] = decode_step(True)
    assert use_packed_gqa(model) and model.config._attn_implementation == ATTENTION
    for padded in (False, True):
        got = decode_step(padded)
        assert calls == []
        assert torch.allclose(got, expected[padded], atol=1e-5)
    # A model on another implementation is left alone.
    eager = copy.deepcopy(model)
    eager.set_attn_implementation("eager")
    assert not use_packed_gqa(eager) and eager.config._attn_implementation == "eager"


def test_a_buffer_left_behind_by_rows_leaving_is_freed(tiny) -> None:
    """Second turn (stored prefixes copied into the batch's buffers), rows stopping at "o": once
    rows leave, each layer's buffer is replaced by one of the live rows, and the old one is
    freed while decoding goes on (a view of the last layer's kept by the prefix copy held it:
    3 % of the cache for SmolLM2's 30 layers)."""
    import gc
    import weakref

    model, tokenizer = tiny
    prompts = _prompts(tokenizer, seeds=(7, 8, 9, 10))
    sampling = SamplingSettings(max_new_tokens=10, temperature=1.0, stop_strings=("o",))

    def gens():
        return [torch.Generator().manual_seed(r) for r in range(4)]

    engine = HFEngine(model, tokenizer)
    first = engine.generate(prompts, sampling, generators=gens())
    follow = [p + g.sampled_ids + p[-4:] for p, g in zip(prompts, first, strict=True)]
    rows: list[int] = []
    first: list[weakref.ref] = []  # the last layer's buffer at the first decoding step
    first_alive: list[bool] = []  # at each later step

    def look(module, args, kwargs) -> None:
        ids, cache = kwargs["input_ids"], kwargs.get("cache", kwargs.get("past_key_values"))
        if ids.shape[1] == 1:  # a decoding step
            gc.collect()
            if first:
                first_alive.append(first[0]() is not None)
            else:
                first.append(weakref.ref(cache.layers[-1]._keys))
            rows.append(ids.shape[0])

    hook = model.register_forward_pre_hook(look, with_kwargs=True)
    try:
        engine.generate(follow, sampling, generators=gens())
    finally:
        hook.remove()
    assert engine.cache.hits == 4
    assert rows[0] == 4 and rows[-1] < 4  # rows left
    assert first_alive[0] and not first_alive[-1]  # freed once they did


def test_vllm_samples_in_the_trainers_autocast_dtype() -> None:
    """bf16 autocast: vLLM's weights in bf16, as the HF engine samples (on the CPU build 2.2x
    faster than its float32 default, docs/performance.md); float32 runs and fp16 autocast keep
    the engine's own default."""
    from baselines.llm.engines import vllm_dtype

    assert vllm_dtype(torch.bfloat16) == "bfloat16"
    assert vllm_dtype(None) == vllm_dtype(torch.float16) == vllm_dtype(torch.float32) == "auto"
