"""Token in, token out: the trained rows are exactly what the policy was given and sampled.

Real tokenizers throughout: SmolLM2's (the embedded model's), a copy of it with a chat template of
our own that drops earlier reasoning, and a copy whose end-of-sequence token is ``<|endoftext|>``
while its template ends turns with ``<|im_end|>``. Where the test needs replies a model *could*
sample but BPE would never produce (a word split in two), :class:`ScriptedEngine` (a real
:class:`~baselines.llm.engines.RolloutEngine` that replays fixed id lists) supplies them.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer, GenerationConfig

from agentgym.lockstep import Step
from baselines.collapse.reasoning import reasoning_ids
from baselines.config import load_config
from baselines.episodes import EpisodeRecord, Sample, collect_rollouts
from baselines.llm.engines import Generation, RolloutEngine, SamplingSettings, end_token_ids
from baselines.llm.policy import embedded_model_path, load_policy
from baselines.llm.prompts import THINK_PREFIX, TokenContext, TrainingRow
from baselines.rl.batch import build_batch, gae_token_advantages, grpo_token_advantages
from baselines.show_rollouts import format_episode, load_step
from baselines.show_rollouts import main as show_main
from baselines.trainer import Trainer
from tests.helpers import FakeEngine

SOKOBAN = "agentgym/Sokoban-v0"


@pytest.fixture(scope="module")
def smol_tokenizer():
    tok = AutoTokenizer.from_pretrained(embedded_model_path())
    tok.padding_side = "left"
    return tok


class ScriptedEngine(FakeEngine):
    """Replays ``replies[k]`` (ids) on the k-th call for every prompt; records the prompts."""

    name = "script"
    provides_logprobs = True

    def __init__(self, tokenizer, replies: list[list[int]], ends: set[int]):
        self.tokenizer, self.replies, self.ends = tokenizer, replies, ends
        self.calls: list[list[list[int]]] = []

    def generate(self, prompt_ids, sampling):
        ids = self.replies[min(len(self.calls), len(self.replies) - 1)]
        self.calls.append([list(p) for p in prompt_ids])
        ended = bool(ids) and ids[-1] in self.ends
        text = self.tokenizer.decode(ids[:-1] if ended else ids, skip_special_tokens=False)
        lps = [-0.5 - 0.01 * k for k in range(len(ids))]
        return [Generation(list(ids), text, lps, ended) for _ in prompt_ids]


def _pieces(tokenizer, *texts: str) -> list[int]:
    """Tokenise each text on its own and join the ids (a split BPE would not make)."""
    out: list[int] = []
    for text in texts:
        out += tokenizer(text, add_special_tokens=False)["input_ids"]
    return out


def assert_exact(episode: EpisodeRecord) -> None:
    """Every turn: its prompt ids then its sampled ids sit in its row as given and sampled; the
    sampled ids (and only they) are trained, with the engine's log-probs."""
    trained = {r: 0 for r in range(len(episode.rows))}
    for turn in episode.turns:
        row = episode.rows[turn.sample.row]
        p, g = len(turn.sample.prompt_ids), len(turn.sample.sampled_ids)
        assert row.input_ids[:p] == turn.sample.prompt_ids
        assert row.input_ids[p : p + g] == turn.sample.sampled_ids
        assert row.loss_mask[p : p + g] == [1] * g
        assert row.logprobs[p : p + g] == turn.sample.logprobs
        trained[turn.sample.row] += g
    for r, row in enumerate(episode.rows):
        assert sum(row.loss_mask) == trained[r]
        assert len(row.input_ids) == len(row.loss_mask) == len(row.logprobs)


def _play(tokenizer, engine, **kw) -> list[EpisodeRecord]:
    sampling = kw.pop("sampling", SamplingSettings(max_new_tokens=64))
    return collect_rollouts(
        None, tokenizer, SOKOBAN, kw.pop("seeds", [0]), kw.pop("group", 1), sampling,
        env_kwargs=kw.pop("env_kwargs", {"max_turns": 4}), engine=engine,
    )  # fmt: skip


def test_smollm2_at_temperature_1_on_sokoban_trains_exactly_the_sampled_ids(smol_tokenizer):
    """The embedded SmolLM2 samples at T=1 for 6 turns in 3 episodes (18 turns)."""
    model, tokenizer = load_policy("embedded", device="cpu", dtype="float32")
    torch.manual_seed(0)
    sampling = SamplingSettings(max_new_tokens=12, temperature=1.0)
    episodes = collect_rollouts(
        model, tokenizer, SOKOBAN, [0, 1, 2], 1, sampling, env_kwargs={"max_turns": 6},
    )  # fmt: skip
    turns = [t for e in episodes for t in e.turns]
    assert len(turns) >= 9
    for episode in episodes:
        assert len(episode.rows) == 1  # SmolLM2's ChatML keeps earlier turns as a prefix
        assert_exact(episode)
    # Re-tokenising the text (the old way) is not the identity on sampled ids at T=1 in general;
    # the rows never depend on it. Count how often it would have differed, for the record.
    moved = sum(
        tokenizer(tokenizer.decode(t.sample.sampled_ids), add_special_tokens=False)["input_ids"]
        != t.sample.sampled_ids
        for t in turns
    )
    print(f"{moved} of {len(turns)} turns would have re-tokenised differently")


def test_replies_split_the_way_bpe_would_not_are_trained_as_sampled(smol_tokenizer):
    tok = smol_tokenizer
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    replies = [
        _pieces(tok, "</think>", " I am", " ", "C", "a", "s", "t", "ing", "<answer>Up</answer>"),
        _pieces(tok, "P", "ush", "ing the b", "ox</think><answer>Left</answer>") + [im_end],
        _pieces(tok, "</", "think><answer>Do", "wn</answer>"),
    ]
    for ids in replies:  # BPE merges these differently: the old re-tokenisation moved them
        text = tok.decode([i for i in ids if i != im_end])
        assert tok(text, add_special_tokens=False)["input_ids"] != [i for i in ids if i != im_end]
    engine = ScriptedEngine(tok, replies, {im_end})
    (episode,) = _play(tok, engine, env_kwargs={"max_turns": 3})
    assert len(episode.turns) == 3 and len(episode.rows) == 1
    assert_exact(episode)
    # The engine was given exactly the row's prefix on every turn.
    for call, turn in zip(engine.calls, episode.turns, strict=True):
        assert call == [turn.sample.prompt_ids]
    # The turn that sampled <|im_end|> trains it; the others end with template tokens, untrained.
    row = episode.rows[0]
    end1 = row.turn_ends[1]
    assert row.input_ids[end1] == im_end and row.loss_mask[end1] == 1
    assert episode.turns[1].sample.ended_with_eos and not episode.turns[0].sample.ended_with_eos


def test_a_reply_that_starts_with_close_think_right_after_the_prefix(smol_tokenizer):
    tok = smol_tokenizer
    reply = tok("</think><answer>Up</answer>", add_special_tokens=False)["input_ids"]
    assert tok.convert_ids_to_tokens(reply[:1]) == ["</"]
    (episode,) = _play(tok, ScriptedEngine(tok, [reply], set()), env_kwargs={"max_turns": 1})
    turn = episode.turns[0]
    assert turn.action == THINK_PREFIX + "</think><answer>Up</answer>"
    row = episode.rows[0]
    p = len(turn.sample.prompt_ids)
    assert row.input_ids[p] == reply[0] and row.loss_mask[p] == 1
    assert_exact(episode)
    # What re-tokenising prompt + reply would give: ">" and "</" merge into "></", so the first
    # sampled token would not exist in the row.
    text = tok.decode(turn.sample.prompt_ids) + tok.decode(reply)
    merged = tok(text, add_special_tokens=False)["input_ids"]
    assert merged[: p - 1] == turn.sample.prompt_ids[:-1] and merged[p - 1 : p + 1] != [
        turn.sample.prompt_ids[-1],
        reply[0],
    ]
    # The MI scorer's z (RAGEN-2's rule, baselines.collapse.reasoning_text): the think block
    # is empty, so there is no z to score (the pair is dropped and counted as invalid thinking).
    assert reasoning_ids(tok, turn) == []


def test_reasoning_ids_are_the_sampled_ids_of_z_without_the_closing_tag(smol_tokenizer):
    tok = smol_tokenizer
    z = tok(" arm A paid 0.7", add_special_tokens=False)["input_ids"]
    close = tok("</think><answer>Up</answer>", add_special_tokens=False)["input_ids"]
    reply = z + close
    (episode,) = _play(tok, ScriptedEngine(tok, [reply], set()), env_kwargs={"max_turns": 1})
    turn = episode.turns[0]
    assert turn.action == THINK_PREFIX + " arm A paid 0.7</think><answer>Up</answer>"
    # The leading blank is part of the first token (" arm"), so every id of z is kept as sampled.
    assert reasoning_ids(tok, turn) == z
    assert tok.decode(z).strip() == "arm A paid 0.7"
    # Never closed: no z, and no "</think>" is added.
    (open_episode,) = _play(tok, ScriptedEngine(tok, [z], set()), env_kwargs={"max_turns": 1})
    assert reasoning_ids(tok, open_episode.turns[0]) == []


def test_a_z_holding_a_special_id_is_dropped_never_spliced(smol_tokenizer):
    """An end-of-turn id sampled inside the think block: before, it was cut out of z and the
    scorer teacher-forced a sequence the policy never produced; now z is dropped and counted."""
    from baselines.collapse.reasoning import reasoning_span

    tok = smol_tokenizer
    left = tok(" arm A", add_special_tokens=False)["input_ids"]
    right = tok(" paid</think><answer>Up</answer>", add_special_tokens=False)["input_ids"]
    special = tok.convert_tokens_to_ids("<|im_end|>")
    assert special in tok.all_special_ids
    reply = left + [special] + right
    (episode,) = _play(tok, ScriptedEngine(tok, [reply], set()), env_kwargs={"max_turns": 1})
    turn = episode.turns[0]
    assert "<|im_end|>" in turn.action.split("</think>")[0]
    assert reasoning_span(tok, turn) == ([], "special")
    assert reasoning_ids(tok, turn) == []
    # The same span without the special id is a valid z, exactly the sampled ids.
    clean = left + right
    (episode,) = _play(tok, ScriptedEngine(tok, [clean], set()), env_kwargs={"max_turns": 1})
    z, status = reasoning_span(tok, episode.turns[0])
    assert status == "valid" and z == left + tok(" paid", add_special_tokens=False)["input_ids"]


# Drops the reasoning of every earlier assistant turn (as several current instruct templates do).
DROP_REASONING = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['role'] == 'assistant' %}{{ m['content'].split('</think>')[-1] }}"
    "{% else %}{{ m['content'] }}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def test_a_template_that_drops_earlier_reasoning_gets_one_exact_row_per_turn(smol_tokenizer):
    tok = copy.deepcopy(smol_tokenizer)
    tok.chat_template = DROP_REASONING
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    replies = [
        _pieces(tok, "first plan</think><answer>Up</answer>") + [im_end],
        _pieces(tok, "second plan</think><answer>Left</answer>") + [im_end],
        _pieces(tok, "third plan</think><answer>Down</answer>"),
    ]
    (episode,) = _play(tok, ScriptedEngine(tok, replies, {im_end}), env_kwargs={"max_turns": 3})
    assert len(episode.turns) == 3
    assert [t.sample.row for t in episode.turns] == [0, 1, 2] and len(episode.rows) == 3
    assert_exact(episode)
    # Each sampled token is trained once, in the row whose prompt the policy saw.
    assert sum(sum(r.loss_mask) for r in episode.rows) == sum(len(r) for r in replies)
    second_prompt = tok.decode(episode.turns[1].sample.prompt_ids)
    assert "first plan" not in second_prompt and "<answer>Up</answer>" in second_prompt


def test_a_template_without_a_generation_prompt_is_a_clear_error(smol_tokenizer):
    tok = copy.deepcopy(smol_tokenizer)
    tok.chat_template = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
    with pytest.raises(ValueError, match=r"chat template of .*renders no generation prompt"):
        TokenContext(tok, "").prompt([{"role": "user", "content": "hi"}])
    tok.chat_template = None
    with pytest.raises(ValueError, match="has no chat template"):
        TokenContext(tok, "").prompt([{"role": "user", "content": "hi"}])


def test_an_eos_that_is_not_the_turn_end_still_trains_the_sampled_turn_end(smol_tokenizer):
    tok = copy.deepcopy(smol_tokenizer)
    tok.eos_token = "<|endoftext|>"
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    assert tok.eos_token_id == 0 != im_end
    holder = type("M", (), {"generation_config": GenerationConfig(eos_token_id=0)})()
    ends = end_token_ids(holder, tok)
    assert ends == {0, im_end}
    replies = [
        _pieces(tok, "go</think><answer>Up</answer>") + [im_end],
        _pieces(tok, "again</think><answer>Left</answer>") + [im_end],
    ]
    (episode,) = _play(tok, ScriptedEngine(tok, replies, ends), env_kwargs={"max_turns": 2})
    assert len(episode.rows) == 1
    assert_exact(episode)
    row = episode.rows[0]
    for end in row.turn_ends:
        assert row.input_ids[end] == im_end and row.loss_mask[end] == 1
    # The template's own "\n<|im_start|>user" follows the sampled <|im_end|>, untrained.
    after = row.turn_ends[0] + 1
    assert tok.decode(row.input_ids[after : after + 2]).startswith("\n<|im_start|>")
    assert row.loss_mask[after] == 0


def _tiny_config(tmp_path: Path, *extra: str):
    return load_config(
        None,
        [
            "model.path=tiny",
            # float32: the equalities below are to 1e-4; under bf16 autocast the engine's
            # incremental decode and the trainer's full pass round differently.
            "model.dtype=float32",
            f"rollout.env_id={SOKOBAN}",
            "rollout.env_kwargs={max_turns: 3}",
            "rollout.num_groups=2",
            "rollout.group_size=2",
            "rollout.max_new_tokens=8",
            "rollout.temperature=0.7",
            "rollout.val_episodes=0",
            "train.threads=1",
            "train.steps=1",
            "diagnostics.every=1",
            "filter.strategy=none",
            f"train.out_dir={tmp_path / 'run'}",
            *extra,
        ],
    )


def test_trainer_logprobs_equal_the_engine_sampling_logprobs_at_temperature_0_7(tmp_path):
    # PPO: its value baseline gives an update even when the random policy's rewards are all equal
    # (GRPO makes no update then, and the check below is logged by the update).
    trainer = Trainer(_tiny_config(tmp_path, "algorithm.name=ppo"), progress=False)
    try:
        episodes, _ = trainer._rollout(0)
        batch = build_batch(episodes, trainer.tokenizer.pad_token_id)
        trainer.model.eval()
        with torch.no_grad():
            mine = trainer.actor.score(trainer.model, batch)["logprobs"]
            raw = trainer.model(
                input_ids=batch.input_ids, attention_mask=batch.attention_mask
            ).logits[:, :-1]
        mask = batch.loss_mask.bool()
        assert mask.sum() >= 20
        # Off the loss mask the trainer reads no log-prob (0 there).
        assert (mine[~mask] == 0).all()
        diff = (mine - batch.sampling_logprobs).abs()[mask]
        print(f"max |trainer - engine| at T=0.7: {diff.max():.2e}")
        assert diff.max() < 1e-4
        # The raw-logit log-prob (the old trainer's) is another distribution.
        untempered = torch.log_softmax(raw.float(), -1).gather(2, batch.input_ids[:, 1:, None])
        assert (untempered[..., 0] - batch.sampling_logprobs).abs()[mask].max() > 1e-2
        # One training step logs the same check (pre-update forward vs engine).
        metrics = trainer.step(0)
        assert metrics["rollout/logprob_diff_max"] < 1e-4
    finally:
        trainer.close()


def test_rollout_dump_holds_the_trained_rows_and_the_viewer_marks_them(tmp_path, capsys):
    config = _tiny_config(tmp_path, "train.dump_rollouts=true", "train.steps=2")
    Trainer(config, progress=False).run()
    run = tmp_path / "run"
    assert sorted(p.name for p in (run / "rollouts").glob("*.jsonl")) == [
        "step_000000.jsonl",
        "step_000001.jsonl",
    ]
    episodes = load_step(run, 1)
    assert len(episodes) == 4
    assert {e["group"] for e in episodes} == {0, 1}
    for e in episodes:
        assert {"env_id", "seed", "group", "reward", "turns", "input_ids", "loss_mask"} <= set(e)
        assert e["env_id"] == SOKOBAN
        sampled = [i for t in e["turns"] for i in t["sampled_ids"]]
        trained = [
            i
            for ids, mask in zip(e["input_ids"], e["loss_mask"], strict=True)
            for i, m in zip(ids, mask, strict=True)
            if m
        ]
        assert trained == sampled
        for t in e["turns"]:
            row = e["input_ids"][t["row"]]
            assert row[: len(t["prompt_ids"])] == t["prompt_ids"]
            assert len(t["logprobs"]) == len(t["sampled_ids"])
    tok = AutoTokenizer.from_pretrained(run / "rollouts" / "tokenizer")
    text = format_episode(tok, episodes[0])
    assert "[[" in text and "]]" in text and f"seed={episodes[0]['seed']}" in text
    assert show_main([str(run), "--step", "1", "--episodes", "1"]) == 0
    assert "=== agentgym/Sokoban-v0" in capsys.readouterr().out
    assert show_main([str(run), "--step", "7"]) == 2
    assert "steps dumped: [0, 1]" in capsys.readouterr().err
    json.dumps(episodes)  # plain JSON throughout


class _CharTokenizer:
    """Token id k decodes to chr(k): a dump's replies can then hold any character."""

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return "".join(chr(i) for i in ids)


def test_show_rollouts_prints_every_field_inert():
    """A dump whose env id, reply and turn fields hold terminal escapes (clear screen, retitle the
    window, CSI as a C1 control, a carriage return): each prints as \\xNN text; newline and tab
    stay; --color adds its own two escapes and nothing else."""
    reply = "ok\x1b[2J\x9b31m\r\n\tdone"
    episode = {
        "env_id": "agentgym/X\x1b]0;pwned\x07",
        "seed": 3,
        "group": 0,
        "reward": 1.5,
        "success": True,
        "input_ids": [[ord(c) for c in "P:" + reply]],
        "loss_mask": [[0, 0] + [1] * len(reply)],
        "turns": [
            {
                "reward": "\x1b[31mred",
                "sampled_ids": [ord(c) for c in reply],
                "logprobs": [-0.5, -1.5],
                "ended_with_eos": True,
                "row": 0,
            }
        ],
    }
    text = format_episode(_CharTokenizer(), episode)
    assert text.split("\n") == [
        "=== agentgym/X\\x1b]0;pwned\\x07 seed=3 group=0 reward=1.5 success=True turns=1",
        "--- row 0: 19 tokens, 17 trained",
        "P:[[ok\\x1b[2J\\x9b31m\\x0d",
        "\tdone]]",
        "turn 1: reward=\\x1b[31mred sampled=17 mean_logprob=-1.000 ended_with_eos=True row=0",
    ]
    # 19 tokens: "P:" and the reply's 17 characters (ok, ESC [ 2 J, CSI 3 1 m, CR, LF, TAB, done)
    colored = format_episode(_CharTokenizer(), episode, color=True)
    assert colored.count("\x1b") == 2 and "\x1b[32mok\\x1b[2J" in colored
    assert colored.endswith(
        "\x1b[0m\nturn 1: reward=\\x1b[31mred sampled=17 mean_logprob=-1.000 "
        "ended_with_eos=True row=0"
    )


def _record(rows: list[TrainingRow], rewards: list[float]) -> EpisodeRecord:
    episode = EpisodeRecord(group=0, seed=0, chat=None)  # type: ignore[arg-type]
    episode.turns = [Step("", r, False, False, {}, Sample([], [], [], False)) for r in rewards]
    episode.rows = rows
    return episode


def _two_turn_rows() -> tuple[TrainingRow, TrainingRow, TrainingRow]:
    """One two-turn episode as one row, and as two rows (``first``, ``second``)."""
    # Episode 0: prompt [1, 2], turn 0 samples [3, 4], template [5], turn 1 samples [6].
    one = TrainingRow([1, 2, 3, 4, 5, 6], [0, 0, 1, 1, 0, 1], [0, 0, -0.1, -0.2, 0, -0.3])
    one.turns, one.turn_ends = [0, 1], [3, 5]
    # The same episode in two rows (a template that rewrote turn 0 for turn 1's prompt).
    first = TrainingRow([1, 2, 3, 4], [0, 0, 1, 1], [0, 0, -0.1, -0.2])
    first.turns, first.turn_ends = [0], [3]
    second = TrainingRow([1, 9, 5, 6], [0, 0, 0, 1], [0, 0, 0, -0.3])
    second.turns, second.turn_ends = [1], [3]
    return one, first, second


def test_the_batch_by_hand_and_gae_across_rows_equals_gae_in_one_row():
    one, first, second = _two_turn_rows()
    joined = build_batch([_record([one], [0.5, 1.0])], pad_id=0)
    split = build_batch([_record([first, second], [0.5, 1.0])], pad_id=0)
    assert joined.input_ids.tolist() == [[1, 2, 3, 4, 5, 6]]
    assert joined.loss_mask.tolist() == [[0, 1, 1, 0, 1]]  # targets input_ids[:, 1:]
    assert joined.sampling_logprobs[0].tolist() == pytest.approx([0, -0.1, -0.2, 0, -0.3])
    assert joined.token_rewards.tolist() == [[0, 0, 0.5, 0, 1.0]]
    assert split.row_episode.tolist() == [0, 0] and split.num_tokens == joined.num_tokens == 3
    values_joined = torch.tensor([[0.0, 0.1, 0.2, 0.0, 0.3]])
    values_split = torch.tensor([[0.0, 0.1, 0.2], [0.0, 0.0, 0.3]])
    # gamma = lam = 1: advantage = (sum of later rewards) - value, before whitening.
    adv_j, ret_j = gae_token_advantages(joined, values_joined, 1.0, 1.0)
    adv_s, ret_s = gae_token_advantages(split, values_split, 1.0, 1.0)
    assert ret_j[0, [1, 2, 4]].tolist() == pytest.approx([1.5, 1.5, 1.0])
    assert ret_s[0, [1, 2]].tolist() + [ret_s[1, 2].item()] == pytest.approx([1.5, 1.5, 1.0])
    assert adv_s[0, 1:3].tolist() + [adv_s[1, 2].item()] == pytest.approx(
        adv_j[0, [1, 2, 4]].tolist(), abs=1e-6
    )
    # GRPO: group [0.5, 1.5] -> (r - mean) / std = -/+0.7071 on every trained token.
    pair = build_batch([_record([one], [0.5, 0.0]), _record([one], [1.0, 0.5])], pad_id=0)
    adv = grpo_token_advantages(pair, torch.tensor([[0.5, 1.5]]))
    assert adv[0].tolist() == pytest.approx([0, -0.7071, -0.7071, 0, -0.7071], abs=1e-3)
    assert adv[1].tolist() == pytest.approx([0, 0.7071, 0.7071, 0, 0.7071], abs=1e-3)
    assert isinstance(ScriptedEngine(None, [[1]], set()), RolloutEngine)


def test_gae_with_the_episode_reward_on_its_last_token_as_ragen_places_it():
    """``turn_rewards=False`` (RAGEN's ``use_turn_scores: False``): turn rewards 0.5 and 1.0 sum
    to 1.5 on the episode's last sampled token, so with gamma = lam = 1 every sampled token's
    return is 1.5 (per turn: 1.5, 1.5 for turn 0's tokens and 1.0 for turn 1's), in one row or
    across two."""
    one, first, second = _two_turn_rows()
    joined = build_batch([_record([one], [0.5, 1.0])], pad_id=0)
    split = build_batch([_record([first, second], [0.5, 1.0])], pad_id=0)
    values = torch.tensor([[0.0, 0.1, 0.2, 0.0, 0.3]])
    _, per_turn = gae_token_advantages(joined, values, 1.0, 1.0)
    adv_j, at_end = gae_token_advantages(joined, values, 1.0, 1.0, turn_rewards=False)
    assert per_turn[0, [1, 2, 4]].tolist() == pytest.approx([1.5, 1.5, 1.0])
    assert at_end[0].tolist() == pytest.approx([0, 1.5, 1.5, 0, 1.5])
    # Before whitening the advantages are return - value: 1.4, 1.3, 1.2 (mean 1.3, std 0.1).
    assert adv_j[0, [1, 2, 4]].tolist() == pytest.approx([1.0, 0.0, -1.0], abs=1e-4)
    values_split = torch.tensor([[0.0, 0.1, 0.2], [0.0, 0.0, 0.3]])
    adv_s, ret_s = gae_token_advantages(split, values_split, 1.0, 1.0, turn_rewards=False)
    assert ret_s[0, [1, 2]].tolist() + [ret_s[1, 2].item()] == pytest.approx([1.5, 1.5, 1.5])
    assert adv_s[0, 1:3].tolist() + [adv_s[1, 2].item()] == pytest.approx(
        adv_j[0, [1, 2, 4]].tolist(), abs=1e-6
    )


def test_hf_eval_of_a_checkpoint_sees_exactly_the_prompts_of_trainer_validation(tmp_path):
    """Greedy validation of the trainer and ``agentgym eval --agent hf:CHECKPOINT`` on the same
    seeds: the same prompt ids on every turn, and the same actions."""
    from agentgym.eval import evaluate
    from baselines.hf_agent import HFAgent

    config = _tiny_config(tmp_path, "rollout.val_episodes=3", "rollout.val_every=1")
    trainer = Trainer(config, progress=False)
    trainer.run()  # one step, validation, checkpoint
    val = trainer.last_val_episodes
    rc = config.rollout
    agent = HFAgent(
        str(tmp_path / "run" / "checkpoint"),
        max_new_tokens=rc.max_new_tokens,
        max_context_tokens=rc.max_context_tokens,
        device="cpu",
    )
    bundle = evaluate(
        [SOKOBAN],
        agent,
        episodes=3,
        seed=rc.val_seed,
        out=tmp_path / "eval.json",
        env_kwargs=rc.env_kwargs,
        progress=False,
    )
    played = bundle["runs"][0]["episodes"]
    assert [e["seed"] for e in played] == [e.seed for e in val]
    for index, (mine, theirs) in enumerate(zip(val, played, strict=True)):
        assert agent.prompt_ids[index] == [t.sample.prompt_ids for t in mine.turns]
        assert [s["action"] for s in theirs["steps"]] == [t.action for t in mine.turns]
