"""Data-parallel training (baselines.distributed): the split and reduce logic, rollouts that do not
depend on how they are batched, and ``torchrun --nproc_per_node 2`` (gloo) against one process.

The end-to-end runs (module fixture ``runs``) train the tiny model for 2 steps three ways: one
process, two ranks under torchrun, and two ranks for step 0 resumed as one process for step 1.
The config is chosen so the two layouts run the *same* micro-batches (see ``EQUAL_LAYOUT``);
then the only difference in the update is the order of a two-term gradient sum, which is exact,
and the weights agree to ``atol=1e-6`` (float32). With micro-batches of another make-up the sums
round differently, and AdamW turns a rounding difference in a gradient entry near 0 into a
weight difference up to ``lr`` (its step is ``lr * m / (sqrt(v) + eps)``): that is why the
layout is pinned rather than the tolerance loosened.
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import nullcontext
from pathlib import Path

import pytest
import torch

from baselines.distributed import Ranks, block, check_launch, world_size_from_environment
from baselines.episodes import (
    TRAIN_STREAM,
    VALIDATION_STREAM,
    collect_rollouts,
    episode_generators,
    episode_seed,
)
from baselines.llm.engines import HFEngine, SamplingSettings, sample_rows
from sandboxes.limits import run_command
from tests.helpers import ROOT

# ----------------------------------------------------------------------------- unit tests


def test_block_splits_contiguously_and_evenly() -> None:
    """Worked by hand: r * n // W .. (r + 1) * n // W."""
    assert [list(block(8, r, 2)) for r in range(2)] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert [list(block(5, r, 2)) for r in range(2)] == [[0, 1], [2, 3, 4]]
    assert [list(block(3, r, 4)) for r in range(4)] == [[], [0], [1], [2]]
    assert list(block(7, 0, 1)) == list(range(7))
    for n in range(10):
        for w in range(1, 5):
            parts = [list(block(n, r, w)) for r in range(w)]
            assert sum(parts, []) == list(range(n))
            assert max(map(len, parts)) - min(map(len, parts)) <= 1


@pytest.mark.parametrize("args", [(-1, 0, 2), (4, 2, 2), (4, -1, 2), (4, 0, 0)])
def test_block_refuses_bad_arguments(args) -> None:
    with pytest.raises(ValueError, match="0 <= rank < world_size"):
        block(*args)


def test_world_size_from_environment(monkeypatch) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert world_size_from_environment() == 1
    monkeypatch.setenv("WORLD_SIZE", "3")
    assert world_size_from_environment() == 3
    monkeypatch.setenv("WORLD_SIZE", "two")
    with pytest.raises(ValueError, match="positive integer"):
        world_size_from_environment()


@pytest.mark.parametrize(
    "variable", ["ACCELERATE_USE_FSDP", "ACCELERATE_USE_DEEPSPEED", "ACCELERATE_USE_MEGATRON_LM"]
)
def test_a_launch_with_an_engine_the_trainer_does_not_run_is_refused(monkeypatch, variable):
    # accelerate launch --use_fsdp (or a config with distributed_type FSDP) sets
    # ACCELERATE_USE_FSDP=true in every process; the trainer's ranks would train replicated.
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    for other in ("ACCELERATE_USE_FSDP", "ACCELERATE_USE_DEEPSPEED", "ACCELERATE_USE_MEGATRON_LM"):
        monkeypatch.setenv(other, "false")
    assert Ranks.from_environment("cpu") == Ranks()  # "false" is a plain launch
    monkeypatch.setenv(variable, "true")
    with pytest.raises(ValueError, match="torchrun --nproc_per_node N -m baselines.train"):
        Ranks.from_environment("cpu")
    with pytest.raises(ValueError, match=variable):
        check_launch({variable: "True"})
    check_launch({variable: "false"})


def test_one_process_collectives_are_the_identity() -> None:
    ranks = Ranks()
    assert (ranks.is_main, ranks.distributed, ranks.device) == (True, False, None)
    assert ranks.gather([1, 2]) == [1, 2]
    assert ranks.broadcast({"a": 1}) == {"a": 1}
    t = torch.ones(3)
    assert ranks.sum_(t) is t and t.tolist() == [1.0, 1.0, 1.0]
    assert ranks.sum_floats({"x": 0.5}) == {"x": 0.5}


class _Linear(torch.nn.Module):
    """``rows @ w`` (+ ``only0`` where asked); ``unused`` is reached by no pass on any rank."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
        self.unused = torch.nn.Parameter(torch.zeros(3))
        self.only0 = torch.nn.Parameter(torch.ones(1))

    def forward(self, rows: torch.Tensor, use_only0: bool) -> torch.Tensor:
        out = rows @ self.w
        return out + self.only0.sum() / 9.0 if use_only0 else out


def _spawn_ranks(target, world: int, *args) -> None:
    """``target(rank, world, port, *args)`` in ``world`` spawned processes (a free local port for
    the process group), each killed if it outlives ``TIMEOUT_S``; all must exit 0."""
    import multiprocessing
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=target, args=(r, world, port, *args)) for r in range(world)]
    for proc in procs:
        proc.start()
    try:
        for proc in procs:
            proc.join(timeout=TIMEOUT_S)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
                proc.join()
    assert [proc.exitcode for proc in procs] == [0] * world


def _join_process_group(rank: int, world: int, port: int) -> None:
    """What torchrun sets for rank ``rank`` of ``world`` (none with one process), 1 thread."""
    if world > 1:
        os.environ.update(
            RANK=str(rank),
            LOCAL_RANK=str(rank),
            WORLD_SIZE=str(world),
            LOCAL_WORLD_SIZE=str(world),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
        )
    torch.set_num_threads(1)


def _two_rank_worker(rank: int, world: int, port: int, out: str) -> None:
    """Rank ``rank`` of 2 (gloo, through accelerate): the collectives the trainer uses, with the
    answers worked by hand written to ``out/rank<r>.json``."""
    _join_process_group(rank, world, port)
    ranks = Ranks.from_environment("cpu")
    result = {"rank": ranks.rank, "world": ranks.world_size, "block": list(ranks.block(5))}
    result["gathered"] = ranks.gather([f"r{rank}a", f"r{rank}b"][: rank + 1])
    result["broadcast"] = ranks.broadcast({"from": rank})
    result["floats"] = ranks.sum_floats({"x": 1.0 + rank, f"only{rank}": 0.5})
    # The update's gradients through DDP (Ranks.data_parallel): each rank's micro-batch loss
    # weighted by its tokens over the mini-batch's global tokens and scaled by the world size
    # (DDP averages); rank 0's 2 rows and rank 1's 3 rows each run as 2 micro-batches, the first
    # under no_sync(). After the last backward, the gradient of the token mean of all rows.
    module = _Linear()
    learner = ranks.data_parallel(module)
    rows = torch.tensor([[1.0, 0.0], [2.0, 1.0], [0.0, 3.0], [1.0, 1.0], [4.0, 0.0]])
    tokens = torch.tensor([1.0, 2.0, 2.0, 3.0, 1.0])  # sampled tokens per row (sum 9)
    mine = list(ranks.block(5))
    micro = [mine[:1], mine[1:]]
    for i, part in enumerate(micro):
        with learner.no_sync() if i == 0 else nullcontext():
            pred = learner(rows[part], use_only0=rank == 0 and i == 1)
            loss = (pred * tokens[part]).sum() / tokens.sum() * ranks.world_size
            loss.backward()
    result["grad_w"] = module.w.grad.tolist()
    result["unused_is_none"] = module.unused.grad is None
    result["grad_only0"] = module.only0.grad.tolist()
    t = torch.tensor([float(rank + 1)])
    result["sum"] = ranks.sum_(t).tolist()
    ranks.barrier()
    Path(out, f"rank{rank}.json").write_text(json.dumps(result))
    ranks.close()


def test_two_gloo_ranks_gather_broadcast_and_reduce_gradients_through_ddp(tmp_path) -> None:
    """Two spawned ranks: gather in rank order, rank 0's broadcast, per-key float sums, and DDP's
    reduction of token-share-weighted gradients (accumulated over micro-batches under
    ``no_sync``, scaled by the world size) equal to the one-batch token-mean gradient; a
    parameter reached on rank 0 only gets its gradient on both, and one reached nowhere keeps
    ``grad = None`` (AdamW skips it, as in one process)."""
    _spawn_ranks(_two_rank_worker, 2, str(tmp_path))
    rows = torch.tensor([[1.0, 0.0], [2.0, 1.0], [0.0, 3.0], [1.0, 1.0], [4.0, 0.0]])
    tokens = torch.tensor([1.0, 2.0, 2.0, 3.0, 1.0])
    expected = ((rows * tokens[:, None]).sum(0) / tokens.sum()).tolist()  # d/dw of the mean
    for rank in range(2):
        got = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert (got["rank"], got["world"]) == (rank, 2)
        assert got["block"] == [[0, 1], [2, 3, 4]][rank]
        assert got["gathered"] == ["r0a", "r1a", "r1b"]
        assert got["broadcast"] == {"from": 0}
        assert got["floats"] == {"x": 3.0, "only0": 0.5, "only1": 0.5}
        assert got["grad_w"] == pytest.approx(expected, rel=1e-6)
        assert got["unused_is_none"] is True
        # d/d only0 of row 1's (2 tokens) term (x + only0 / 9) * 2 / 9, the one-process value.
        assert got["grad_only0"] == pytest.approx([2.0 / 81.0], rel=1e-6)
        assert got["sum"] == [3.0]


def test_num_groups_not_divisible_by_the_world_size_names_the_fix(tmp_path, monkeypatch) -> None:
    from baselines.config import load_config
    from baselines.trainer import Trainer

    monkeypatch.setenv("WORLD_SIZE", "2")
    config = load_config(
        None, ["model.path=tiny", "rollout.num_groups=3", f"train.out_dir={tmp_path}/run"]
    )
    with pytest.raises(ValueError, match="multiple of 2"):
        Trainer(config, progress=False)
    assert not (tmp_path / "run").exists()  # refused before anything is written


def test_episode_seed_is_a_function_of_the_position_only() -> None:
    seeds = {
        episode_seed(0, stream, step, group, member)
        for stream in (TRAIN_STREAM, VALIDATION_STREAM)
        for step in range(3)
        for group in range(4)
        for member in range(4)
    }
    assert len(seeds) == 2 * 3 * 4 * 4  # no two positions share a seed
    assert all(0 <= s < 2**63 for s in seeds)
    assert episode_seed(7, 0, 1, 2, 3) == episode_seed(7, 0, 1, 2, 3)
    assert episode_seed(7, 0, 1, 2, 3) != episode_seed(8, 0, 1, 2, 3)
    assert episode_seed(-1, 0, 0, 0, 0) == episode_seed(2**64 - 1, 0, 0, 0, 0)
    with pytest.raises(ValueError, match=">= 0"):
        episode_seed(0, 0, -1, 0, 0)
    # A block of groups gets the generators of those groups in the whole batch.
    whole = episode_generators(3, TRAIN_STREAM, 5, range(4), 2)
    part = episode_generators(3, TRAIN_STREAM, 5, range(2, 4), 2)
    assert [g.initial_seed() for g in whole[4:]] == [g.initial_seed() for g in part]


def test_sample_rows_draws_each_row_from_its_own_generator() -> None:
    """A row's draw depends on its distribution and generator only, and rows that are done draw
    nothing (their generator does not advance)."""
    torch.manual_seed(0)
    probs = torch.softmax(torch.randn(6, 50), dim=-1)

    def gens():
        return [torch.Generator().manual_seed(100 + r) for r in range(6)]

    together = sample_rows(probs, list(range(6)), gens())
    for r in range(6):
        alone = sample_rows(probs[r : r + 1], [0], [gens()[r]])
        assert int(alone[0]) == int(together[r])
    g = gens()
    before = g[2].get_state().clone()
    sample_rows(probs, [0, 1, 3], g)
    assert torch.equal(g[2].get_state(), before)
    with pytest.raises(ValueError, match="one torch.Generator per prompt"):
        sample_rows(probs, [0], gens()[:2])


def test_sample_rows_draws_each_token_with_its_probability_across_blocks() -> None:
    """Inversion in two levels (blocks of 1,024 tokens): over 3,000 tokens the mass sits on both
    sides of the block edges (1023 | 1024, 2047 | 2048) and on the last token; 8,000 draws of one
    seeded generator give each token its probability (within 4.5 binomial sds: the draws are
    fixed by the seed, so this either always or never passes), and no token of probability 0 is
    ever drawn."""
    probs = torch.zeros(2, 3000)
    mass = {1023: 0.1, 1024: 0.2, 2047: 0.3, 2048: 0.15, 2999: 0.25}
    for token, p in mass.items():
        probs[0, token] = p
    probs[1, 5] = 1.0
    g = [torch.Generator().manual_seed(11), torch.Generator().manual_seed(12)]
    draws = 8000
    counts: dict[int, int] = {}
    for _ in range(draws):
        first, second = sample_rows(probs, [0, 1], g).tolist()
        counts[first] = counts.get(first, 0) + 1
        assert second == 5
    assert set(counts) == set(mass)
    for token, p in mass.items():
        sd = (draws * p * (1 - p)) ** 0.5
        assert abs(counts[token] - draws * p) < 4.5 * sd


@pytest.fixture(scope="module")
def tiny():
    from baselines.episodes import vocabulary_texts
    from baselines.llm.policy import load_policy

    texts = vocabulary_texts("agentgym/FrozenLake-v0", {}, range(32))
    return load_policy("tiny", device="cpu", dtype="float32", texts=texts, seed=0)


def _tokens(episodes) -> list[list[list[int]]]:
    return [[t.sample.sampled_ids for t in e.turns] for e in episodes]


def test_an_episode_samples_the_same_ids_alone_in_a_batch_of_64_and_in_split_batches(tiny):
    """16 groups x 4 of multi-turn FrozenLake (up to 3 turns of up to 12 sampled tokens, so the
    generators carry across turns and rows stop at different times) in one decoding batch of
    64, in batches of a few rows (``max_batch_tokens``), and each episode alone with its own
    generator: the same token ids everywhere."""
    model, tokenizer = tiny
    torch.set_num_threads(1)
    sampling = SamplingSettings(max_new_tokens=12, temperature=1.0, stop_strings=())
    kwargs = {"max_turns": 3}
    P, N = 16, 4
    seeds = list(range(100, 100 + P))

    def play(engine, groups, generators):
        with torch.no_grad():
            return collect_rollouts(
                model,
                tokenizer,
                "agentgym/FrozenLake-v0",
                [seeds[g] for g in groups],
                N,
                sampling,
                env_kwargs=kwargs,
                engine=engine,
                generators=generators,
                first_group=groups.start,
            )

    batch = play(HFEngine(model, tokenizer), range(P), episode_generators(1, 0, 2, range(P), N))
    assert sum(len(e.turns) for e in batch) > P * N  # several turns
    assert len({tuple(map(tuple, t)) for t in _tokens(batch)}) > 1
    split_engine = HFEngine(model, tokenizer, max_batch_tokens=4 * 300)
    split = play(split_engine, range(P), episode_generators(1, 0, 2, range(P), N))
    assert _tokens(split) == _tokens(batch)
    assert [e.group for e in split] == [g for g in range(P) for _ in range(N)]
    for g in (0, 7, 15):
        alone_groups = range(g, g + 1)
        gens = episode_generators(1, 0, 2, alone_groups, N)
        for member in range(N):
            one = collect_rollouts(
                model,
                tokenizer,
                "agentgym/FrozenLake-v0",
                [seeds[g]],
                1,
                sampling,
                env_kwargs=kwargs,
                engine=HFEngine(model, tokenizer),
                generators=[gens[member]],
            )
            assert _tokens(one) == _tokens([batch[g * N + member]])


# ----------------------------------------------------------------------------- torchrun runs

#: Bandit with one-token raw answers on the tiny model. PPO with a KL term and 2 epochs runs
#: every pre-update pass (old and reference log-probs, values) and 4 optimizer steps; the filter
#: keeps 2 of 4 groups (top_k_abs), validation plays 3 episodes (split 1 + 2 over ranks), the
#: MI diagnostics run on rank 0 and are broadcast (raw answers hold no reasoning: counts only).
#: EQUAL_LAYOUT: the rows of a group have equal length (one sampled token), so micro-batches of
#: 4 rows are whole groups in one process (longest first, ties by index) and the 8 kept rows
#: split over 2 ranks are one group each: both layouts run the same two micro-batches.
EQUAL_LAYOUT = [
    "model.path=tiny",
    "rollout.env_id=agentgym/Bandit-v0",
    "rollout.env_kwargs={action_format: raw, high_arm_prob: 1.0}",
    "rollout.think_prefix=false",
    "rollout.max_new_tokens=1",
    "rollout.num_groups=4",
    "rollout.group_size=4",
    "rollout.val_episodes=3",
    "rollout.val_every=1",
    "algorithm.name=ppo",
    "algorithm.kl_coef=0.05",
    "algorithm.ppo_epochs=2",
    "algorithm.lr=0.01",
    "algorithm.micro_batch_size=4",
    "filter.strategy=top_k_abs",
    "filter.k=2",
    "diagnostics.every=1",
    "train.threads=1",
    "train.dump_rollouts=true",
    "train.final_optimizer_state=true",
    "model.dtype=float32",
]

TIMEOUT_S = 900  # a bound against hangs, far above the ~1 min a run takes on a busy 2-core box


def _launch(out_dir: Path, nproc: int, *extra: str) -> str:
    """``python -m baselines.train`` (``nproc`` 1) or ``torchrun --standalone --nproc_per_node
    nproc -m baselines.train`` in its own process group, killed as a group on failure or time
    out (no rank outlives the test); returns the combined output."""
    args = [*EQUAL_LAYOUT, f"train.out_dir={out_dir}", "--no-progress", *extra]
    if nproc == 1:
        command = [sys.executable, "-m", "baselines.train", *args]
    else:
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={nproc}",
            "-m",
            "baselines.train",
            *args,
        ]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    for key in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    run = run_command(command, timeout=TIMEOUT_S, env=env, cwd=ROOT, merge_stderr=True)
    assert not run.timed_out, f"over {TIMEOUT_S} s:\n{run.stdout[-4000:]}"
    assert run.returncode == 0, run.stdout[-4000:]
    return run.stdout


def _metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def _weights(run: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    state = load_file(run / "checkpoint" / "model.safetensors")
    state.update({f"value_head.{k}": v for k, v in _value_head(run).items()})
    return state


def _sampled_ids(run: Path, step: int) -> list[list[int]]:
    """Each dumped episode's sampled ids (the engine's log-probs beside them differ in the last
    bits with the decoding batch's make-up: ``rollout/logprob_diff``)."""
    lines = (run / f"rollouts/step_{step:06d}.jsonl").read_text().splitlines()
    return [json.loads(line)["turns"][0]["sampled_ids"] for line in lines]


def _value_head(run: Path) -> dict[str, torch.Tensor]:
    return torch.load(run / "checkpoint" / "value_head.pt", map_location="cpu")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ddp")
    out = {"one": root / "one", "two": root / "two", "resumed": root / "resumed"}
    _launch(out["one"], 1, "train.steps=2")
    out["two_log"] = _launch(out["two"], 2, "train.steps=2")  # type: ignore[assignment]
    _launch(out["resumed"], 2, "train.steps=1")
    _launch(out["resumed"], 1, "train.steps=2", "--resume")
    fsdp2 = "train.strategy=fsdp2"
    out["fsdp2"], out["fsdp2_resumed"] = root / "fsdp2", root / "fsdp2_resumed"
    out["fsdp2_log"] = _launch(out["fsdp2"], 2, "train.steps=2", fsdp2)  # type: ignore[assignment]
    _launch(out["fsdp2_resumed"], 1, "train.steps=1")  # one process, train.strategy=ddp
    _launch(out["fsdp2_resumed"], 2, "train.steps=2", fsdp2, "--resume")
    return out


def _assert_same_steps(a: list[dict], b: list[dict]) -> None:
    assert [m["step"] for m in a] == [m["step"] for m in b]
    for x, y in zip(a, b, strict=True):
        assert x.keys() == y.keys()
        for key in x:
            if key.startswith("timing/") or x[key] is None:
                assert key.startswith("timing/") or y[key] is None, key
                continue
            if key.startswith(("filter/", "rollout/reward", "rollout/success", "val/")):
                assert x[key] == y[key], key  # decided on the same gathered episodes
            elif key.startswith("rollout/logprob_diff"):
                # The engine's log-probs come from decoding batches of another size (rounding).
                assert y[key] == pytest.approx(x[key], abs=1e-5), key
            else:
                assert y[key] == pytest.approx(x[key], rel=1e-5, abs=1e-7), key


def test_two_ranks_equal_one_process(runs) -> None:
    """torchrun with 2 ranks (gloo) vs one process, same global batch, 2 steps: the same sampled
    ids of every episode, the same filter decisions (filter/* exactly), the same actor/* to
    float tolerance, and the same final weights and value head (atol 1e-6; module docstring)."""
    one, two = _metrics(runs["one"]), _metrics(runs["two"])
    assert len(one) == 2
    _assert_same_steps(one, two)
    assert one[0]["filter/num_kept"] == 2  # the filter did drop groups
    assert one[1]["actor/optimizer_steps"] == 2
    for step in (0, 1):
        assert _sampled_ids(runs["two"], step) == _sampled_ids(runs["one"], step)
        b = (runs["two"] / f"rollouts/step_{step:06d}.jsonl").read_text().splitlines()
        assert [json.loads(y)["group"] for y in b] == [g for g in range(4) for _ in range(4)]
    wa, wb = _weights(runs["one"]), _weights(runs["two"])
    assert wa.keys() == wb.keys()
    for key in wa:
        torch.testing.assert_close(wb[key], wa[key], atol=1e-6, rtol=0, msg=key)
    log = runs["two_log"]
    assert "rank 0/2: peak RSS" in log and "rank 1/2: peak RSS" in log  # type: ignore[operator]
    assert sorted(p.name for p in (runs["two"] / "checkpoint").iterdir()) == sorted(
        p.name for p in (runs["one"] / "checkpoint").iterdir()
    )


def test_two_ranks_resume_as_one_process_and_continue_identically(runs) -> None:
    """Step 0 on 2 ranks, then ``--resume`` in one process for step 1: the metrics and final
    weights of the 2-step one-process run (the checkpoint holds no per-rank state)."""
    _assert_same_steps(_metrics(runs["one"]), _metrics(runs["resumed"]))
    wa, wr = _weights(runs["one"]), _weights(runs["resumed"])
    for key in wa:
        torch.testing.assert_close(wr[key], wa[key], atol=1e-6, rtol=0, msg=key)


def _assert_same_weights(a: Path, b: Path, name: str = "model.safetensors") -> None:
    from safetensors.torch import load_file

    wa, wb = load_file(a / "checkpoint" / name), load_file(b / "checkpoint" / name)
    assert wa.keys() == wb.keys()
    for key in wa:
        torch.testing.assert_close(wb[key], wa[key], atol=1e-6, rtol=0, msg=key)


def test_fsdp2_two_ranks_equal_one_process(runs) -> None:
    """``train.strategy=fsdp2`` (FSDP2's ``fully_shard`` over gloo: each rank holds half of every
    weight, gradient and AdamW moment) against one process, 2 steps: the same metrics, filter
    decisions and sampled ids as the one process, the same final weights, value head and AdamW
    state (atol 1e-6), written as the one process's files (the same names and keys: a tied LM
    head once, the optimizer state indexed by position)."""
    one, sharded = _metrics(runs["one"]), _metrics(runs["fsdp2"])
    _assert_same_steps(one, sharded)
    for step in (0, 1):
        assert _sampled_ids(runs["fsdp2"], step) == _sampled_ids(runs["one"], step)
    _assert_same_weights(runs["one"], runs["fsdp2"])
    heads = _value_head(runs["one"]), _value_head(runs["fsdp2"])
    for key in heads[0]:
        torch.testing.assert_close(heads[1][key], heads[0][key], atol=1e-6, rtol=0)
    oa, ob = (torch.load(r / "checkpoint" / "optimizer.pt") for r in (runs["one"], runs["fsdp2"]))
    assert [g["params"] for g in ob["param_groups"]] == [g["params"] for g in oa["param_groups"]]
    assert ob["state"].keys() == oa["state"].keys()
    for index, state in oa["state"].items():
        for key in ("exp_avg", "exp_avg_sq"):
            torch.testing.assert_close(ob["state"][index][key], state[key], atol=1e-6, rtol=0)
    assert sorted(p.name for p in (runs["fsdp2"] / "checkpoint").iterdir()) == sorted(
        p.name for p in (runs["one"] / "checkpoint").iterdir()
    )


def test_fsdp2_ranks_hold_half_of_the_weights_each(runs) -> None:
    """Each rank's local shards hold about half of the weight elements, and the two halves add
    up to the whole (dim-0 shards; FSDP2 pads an odd row count, so not exactly half)."""
    import re

    held = re.findall(r"rank (\d)/2 \(fsdp2\): holds ([\d,]+) of ([\d,]+)", runs["fsdp2_log"])
    counts = {int(r): (int(h.replace(",", "")), int(t.replace(",", ""))) for r, h, t in held}
    assert sorted(counts) == [0, 1]
    total = counts[0][1]
    assert counts[1][1] == total > 0
    assert counts[0][0] + counts[1][0] == total
    assert all(0.4 * total < h < 0.6 * total for h, _ in counts.values())


def test_fsdp2_resumes_into_shards_and_continues_identically(runs) -> None:
    """Step 0 in one process (``ddp``, the default), then ``--resume`` under fsdp2 on 2 ranks
    (the strategy may change on a resume): the whole AdamW state read from the checkpoint by
    rank 0 is broadcast into each rank's shards, and step 1 gives the one-process run's metrics
    and weights."""
    _assert_same_steps(_metrics(runs["one"]), _metrics(runs["fsdp2_resumed"]))
    _assert_same_weights(runs["one"], runs["fsdp2_resumed"])


@pytest.fixture(scope="module")
def critic_runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ddp_critic")
    out = {"one": root / "one", "two": root / "two"}
    _launch(out["one"], 1, "train.steps=2", "algorithm.critic=model")
    _launch(out["two"], 2, "train.steps=2", "algorithm.critic=model")
    out["fsdp2"] = root / "fsdp2"
    _launch(out["fsdp2"], 2, "train.steps=2", "algorithm.critic=model", "train.strategy=fsdp2")
    return out


def test_two_ranks_equal_one_process_with_a_critic_model(critic_runs) -> None:
    """RAGEN's separate critic (``algorithm.critic=model``) under torchrun with 2 ranks: its
    values are scored per rank and summed, its gradients SUM-reduced like the policy's, so the
    metrics (critic/* included) and the final policy and critic weights are the one process's."""
    from safetensors.torch import load_file

    one, two = _metrics(critic_runs["one"]), _metrics(critic_runs["two"])
    _assert_same_steps(one, two)
    assert one[1]["critic/vf_loss"] is not None and one[1]["actor/optimizer_steps"] == 2
    for name in ("model.safetensors", "critic.safetensors"):
        wa = load_file(critic_runs["one"] / "checkpoint" / name)
        wb = load_file(critic_runs["two"] / "checkpoint" / name)
        assert wa.keys() == wb.keys()
        for key in wa:
            torch.testing.assert_close(wb[key], wa[key], atol=1e-6, rtol=0, msg=key)


# ----------------------------------------------------------------------------- uneven layouts

#: FrozenLake on the tiny model: multi-turn episodes (up to 3 turns, replies of up to 4 tokens),
#: PPO with RAGEN's separate critic and a KL term, 2 epochs of 2 mini-batches. Micro-batches of
#: at most 3 rows make the layouts differ (``PACKINGS``): one process packs a mini-batch's 4 rows
#: 3 + 1, two ranks 2 and 2, so the gradient sums round differently and their weighting is what is
#: tested; mini-batches of 3 rows one at a time give rank 0 one row and rank 1 two, so rank 0 runs
#: a zero-weighted dummy pass to match rank 1's two backward passes. The learning rates are
#: 1e-30 (AdamW moves no float32 weight): every optimizer step's gradient is taken at the same
#: weights in both layouts, so each can be compared, not only the first.
UNEVEN_LAYOUT = [
    "model.path=tiny",
    "model.dtype=float32",
    "rollout.env_id=agentgym/FrozenLake-v0",
    "rollout.env_kwargs={max_turns: 3}",
    "rollout.think_prefix=false",
    "rollout.max_new_tokens=4",
    "rollout.num_groups=4",
    "rollout.group_size=4",
    "rollout.val_episodes=0",
    "algorithm.name=ppo",
    "algorithm.critic=model",
    "algorithm.kl_coef=0.05",
    "algorithm.ppo_epochs=2",
    "algorithm.lr=1e-30",
    "algorithm.critic_lr=1e-30",
    "algorithm.grad_clip=1e9",
    "filter.strategy=top_k_abs",
    "filter.k=2",
    "diagnostics.every=0",
    "train.threads=1",
]

#: What a worker records of the batch the update receives (advantages and its other inputs).
BATCH_FIELDS = ("loss_mask", "advantages", "returns", "old_logprobs", "ref_logprobs", "values")


#: (mini-batch rows, micro-batch rows, optimizer steps, dummy passes of 2 ranks: rank 0, per
#: epoch, in each of the two 3-row mini-batches of 8 rows, the actor's and the critic's).
PACKINGS = [(4, 3, 4, 0), (3, 1, 6, 8)]


def _uneven_worker(
    rank: int, world: int, port: int, out: str, packing: tuple, strategy: str
) -> None:
    """One step of the real trainer as rank ``rank`` of ``world`` (1: no process group), the
    batch handed to the update and every optimizer step's (reduced) gradients saved by rank 0
    to ``out/record.pt``."""
    _join_process_group(rank, world, port)
    import baselines.update as update_module
    from baselines.config import load_config
    from baselines.trainer import Trainer

    mini, micro = packing[:2]
    settings = [
        f"algorithm.ppo_mini_batch_size={mini}",
        f"algorithm.micro_batch_size={micro}",
        f"train.strategy={strategy}",
    ]
    config = load_config(None, [*UNEVEN_LAYOUT, *settings, f"train.out_dir={out}/run"])
    trainer = Trainer(config, progress=False)
    record: dict[str, list] = {"actor": [], "critic": [], "batch": [], "dummies": []}
    split = update_module.split_packs

    def counting_split(packs, count):
        out = split(packs, count)
        record["dummies"].append(out.count(None))
        return out

    update_module.split_packs = counting_split
    for name, worker in (("actor", trainer.actor), ("critic", trainer.critic_worker)):
        params = [p for g in worker.optimizer.param_groups for p in g["params"]]
        take_step = worker.optimizer.step

        def step(*args, _params=params, _name=name, _step=take_step, **kwargs):
            grads = [None if p.grad is None else _whole(p.grad).detach().clone() for p in _params]
            record[_name].append(grads)
            return _step(*args, **kwargs)

        worker.optimizer.step = step
    update = trainer.actor.update

    def recording_update(batch, **kwargs):
        record["batch"].append({f: getattr(batch, f).clone() for f in BATCH_FIELDS})
        return update(batch, **kwargs)

    trainer.actor.update = recording_update
    metrics = trainer.step(0)
    trainer.close()
    if rank == 0:
        torch.save({"record": record, "metrics": metrics}, Path(out, "record.pt"))
    trainer.ranks.close()


def _whole(tensor: torch.Tensor) -> torch.Tensor:
    """A DTensor's whole value (collective: every rank calls), a plain tensor itself."""
    return tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor


def _spawn(world: int, out: Path, packing: tuple, strategy: str = "ddp") -> dict:
    _spawn_ranks(_uneven_worker, world, str(out), packing, strategy)
    return torch.load(out / "record.pt", weights_only=False)


@pytest.mark.parametrize("strategy", ["ddp", "fsdp2"])
@pytest.mark.parametrize("packing", PACKINGS)
def test_two_ranks_with_uneven_packing_give_the_one_process_gradients(
    tmp_path, packing, strategy
) -> None:
    """1 process against 2 ranks (DDP replicas, or FSDP2 shards whose reduce-scattered gradient
    is gathered whole to compare) on multi-turn rows packed differently (``UNEVEN_LAYOUT``):
    the batch reaching the update is the same (the filter kept the same groups; advantages,
    returns and the critic's values equal to the bit; the old and reference log-probs, scored in
    micro-batches of another make-up, to 2 ulp), and every optimizer step's reduced gradient,
    actor's and critic's, equals the one process's to float32 rounding.

    The tolerance: each gradient entry is a sum over the batch's tokens, accumulated in another
    grouping (other micro-batches, a sum over two ranks, DDP's scaling by 2 then averaging,
    which is exact); float32 sums of n terms in two orders differ by at most about
    ``2 n u sum|terms|`` with ``u = 2**-24``. Here n is a few hundred tokens and the terms mostly
    share a sign: the test allows ``1e-5 * max|g|`` per tensor (~170 u; n u ~ 5e-6 for the 90
    tokens trained), measured 6.6e-7 at most over the 168 tensors of 4 steps. A micro-batch
    weighted by its rank's tokens instead of the mini-batch's, or a missing world-size factor,
    moves entries by tens of percent (both fail it: checked by mutation)."""
    one = _spawn(1, tmp_path / "one", packing)
    two = _spawn(2, tmp_path / "two", packing, strategy)
    steps, dummies = packing[2:]
    assert sum(one["record"]["dummies"]) == 0  # one process never pads
    assert sum(two["record"]["dummies"]) == dummies  # rank 0's (actor's and critic's)
    (b1,), (b2,) = one["record"]["batch"], two["record"]["batch"]
    assert int(b1["loss_mask"].sum()) > 0
    for name in ("loss_mask", "advantages", "returns", "values"):
        assert torch.equal(b1[name], b2[name]), name
    for name in ("old_logprobs", "ref_logprobs"):  # ~5 nats: 1 ulp is 4.8e-7
        torch.testing.assert_close(b2[name], b1[name], rtol=0, atol=1e-6, msg=name)
    for key, value in one["metrics"].items():
        if key.startswith("filter/"):
            assert two["metrics"][key] == value, key
    assert one["metrics"]["actor/optimizer_steps"] == steps  # 2 epochs x the mini-batches
    for worker in ("actor", "critic"):
        steps1, steps2 = one["record"][worker], two["record"][worker]
        assert len(steps1) == len(steps2) == steps
        for s, (g1, g2) in enumerate(zip(steps1, steps2, strict=True)):
            for i, (a, b) in enumerate(zip(g1, g2, strict=True)):
                assert (a is None) == (b is None), (worker, s, i)
                if a is None:
                    continue
                scale = float(a.abs().max())
                torch.testing.assert_close(
                    b, a, rtol=1e-5, atol=1e-5 * scale, msg=f"{worker} step {s} tensor {i}"
                )


def test_fsdp2_with_a_critic_model_equals_one_process(critic_runs) -> None:
    """The critic model sharded too (its own FSDP2 units and sharded AdamW): the same metrics and
    the same final policy and critic weights as one process."""
    _assert_same_steps(_metrics(critic_runs["one"]), _metrics(critic_runs["fsdp2"]))
    for name in ("model.safetensors", "critic.safetensors"):
        _assert_same_weights(critic_runs["one"], critic_runs["fsdp2"], name)


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        (["train.strategy=zero3"], "train.strategy"),
        (["train.strategy=fsdp2", "model.lora_rank=8"], "set train.strategy=ddp"),
        (["train.strategy=fsdp2", "rollout.engine=vllm"], "rollout.engine=hf"),
    ],
)
def test_a_strategy_the_trainer_cannot_run_is_refused(settings, match) -> None:
    from baselines.config import load_config

    with pytest.raises(ValueError, match=match):
        load_config(None, ["model.path=tiny", *settings])


def test_full_weights_and_full_state_without_sharding_are_plain() -> None:
    """One process (or ddp): nothing to gather; the state dicts are the objects' own."""
    ranks = Ranks()
    module = torch.nn.Linear(2, 1)
    with ranks.full_weights(module):
        assert ranks.data_parallel(module) is module
    assert ranks.full_state(module).keys() == module.state_dict().keys()
    opt = torch.optim.AdamW(module.parameters())
    assert ranks.full_optimizer_state(module, opt) == opt.state_dict()
