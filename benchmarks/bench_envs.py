"""Speed of every registered environment, and of the Sokoban room generator against gym-sokoban.

Run from the repository root (one core: BLAS/OpenMP threads are set to 1 and, where the OS allows,
the process is pinned to one CPU)::

    python benchmarks/bench_envs.py                 # 1 s per measurement
    python benchmarks/bench_envs.py --seconds 3 --policy random

Prints two tables:

* per registered id: ``reset``\\ s per second, and ``step`` calls (turns) per second with the
  oracle's actions (``--policy oracle``, default) or random valid actions (``--policy random``);
  only the ``env.step`` / ``env.reset`` calls are timed, not the policy;
* math answer checks per second for each ``agentgym/Math*`` id (:func:`agentgym.answers.check_answer`
  on math-verify): answers in three forms per problem (the reference, ``The answer is X.``, and a
  wrong number), the reference already read once per problem as the environment does;
* Sokoban room generation, rooms per second at 6x6 with 1 box and 8x8 with 2 boxes: agentgym's
  generator (``agentgym.envs.sokoban_generation``) beside ``gym_sokoban.envs.room_utils.
  generate_room`` (gym-sokoban, the generator RAGEN uses) in the same process, and their ratio.

gym-sokoban's package ``__init__`` imports ``gym`` and ``pkg_resources`` (absent on new
setuptools), so its pure-numpy ``room_utils.py`` is loaded straight from its file, which needs
neither. Benchmarks are never run by the tests.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"  # before numpy is imported

import argparse  # noqa: E402
import importlib.metadata  # noqa: E402
import importlib.util  # noqa: E402
import inspect  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from types import ModuleType  # noqa: E402
from typing import Any  # noqa: E402

import gymnasium  # noqa: E402
import numpy as np  # noqa: E402

import agentgym  # noqa: E402

# ----------------------------------------------------------------------------- environments


def _available(env_id: str) -> str | None:
    module = agentgym.registered_envs()[env_id].entry_point.partition(":")[0]
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name == module:
            return "module not written yet"
        raise
    return None


def _policy(env: gymnasium.Env, rng: np.random.Generator, kind: str) -> str:
    inner = env.unwrapped
    if kind == "random" and inner.valid_actions():
        valid = inner.valid_actions()
        n = int(rng.integers(1, inner.max_actions_per_turn + 1))
        picks = [valid[int(i)] for i in rng.integers(len(valid), size=n)]
        return agentgym.format_answer(picks, inner.action_format)
    return inner.oracle_answer()


def bench_resets(env_id: str, seconds: float) -> float:
    """Resets per second, seeds 0, 1, 2, ... (each a new episode)."""
    env = gymnasium.make(env_id)
    env.reset(seed=0)  # warm up imports and caches
    count, elapsed = 0, 0.0
    while elapsed < seconds:
        start = time.perf_counter()
        for _ in range(10):
            env.reset(seed=count)
            count += 1
        elapsed += time.perf_counter() - start
    env.close()
    return count / elapsed


def bench_steps(env_id: str, seconds: float, kind: str) -> tuple[float, float]:
    """(turns per second, executed actions per second) over whole episodes; only step is timed."""
    env = gymnasium.make(env_id)
    rng = np.random.default_rng(0)
    steps = actions = 0
    elapsed = 0.0
    seed = 0
    while elapsed < seconds:
        env.reset(seed=seed)
        seed += 1
        done = False
        while not done:
            answer = _policy(env, rng, kind)
            start = time.perf_counter()
            _, _, terminated, truncated, info = env.step(answer)
            elapsed += time.perf_counter() - start
            steps += 1
            actions += len(info["executed_actions"])
            done = terminated or truncated
    env.close()
    return steps / elapsed, actions / elapsed


# ----------------------------------------------------------------------------- math answer checks


def bench_answer_checks(env_id: str, seconds: float) -> tuple[float, float]:
    """(answer checks per second, fraction judged correct) on the problems of seeds 0, 1, 2, ...

    Each problem is checked against three answers: its reference, ``The answer is <ref>.`` (both
    correct) and ``<ref> + 1`` (wrong). Only :func:`agentgym.answers.check_answer` is timed; the
    answer text is read inside it (``parse_answer``), as in a step.
    """
    from agentgym.answers import check_answer, parse_answer

    env = gymnasium.make(env_id)
    checks = correct = seed = 0
    elapsed = 0.0
    while elapsed < seconds:
        env.reset(seed=seed)
        seed += 1
        reference = env.unwrapped.oracle_actions()[0]
        gold = parse_answer(env.unwrapped.problem.answer)
        for answer in (reference, f"The answer is {reference}.", f"{reference} + 1"):
            start = time.perf_counter()
            verdict = check_answer(gold, answer)
            elapsed += time.perf_counter() - start
            checks += 1
            correct += verdict
    env.close()
    return checks / elapsed, correct / checks


# ----------------------------------------------------------------------------- Sokoban generators

#: (room, boxes, step budget): the settings of Sokoban-v0 and SokobanHard-v0.
SIZES: tuple[tuple[tuple[int, int], int, int], ...] = (((6, 6), 1, 10), ((8, 8), 2, 30))


def load_gym_sokoban_room_utils() -> ModuleType | None:
    """gym-sokoban's ``room_utils`` module, loaded from its file without the package ``__init__``."""
    spec = importlib.util.find_spec("gym_sokoban")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "envs" / "room_utils.py"
    module_spec = importlib.util.spec_from_file_location("_peer_gym_sokoban_room_utils", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


Generator = Callable[[tuple[int, int], int, int, int], Any]  # (dim, boxes, max_steps, seed)


def peer_generator(room_utils: ModuleType) -> Generator:
    """gym-sokoban's ``generate_room`` with the settings of its own SokobanEnv (num_gen_steps).

    It has no step budget: its rooms are solvable (reverse play) but not proved solvable within
    ``max_steps``, which agentgym's generator guarantees with an exhaustive search.
    """

    def generate(dim: tuple[int, int], num_boxes: int, max_steps: int, seed: int) -> Any:
        random.seed(seed)  # it draws from the global `random` and `np.random` generators
        np.random.seed(seed)
        return room_utils.generate_room(
            dim=dim, num_steps=int(1.7 * (dim[0] + dim[1])), num_boxes=num_boxes
        )

    return generate


def our_generator() -> tuple[str, Generator] | None:
    """agentgym's Sokoban room generator as ``(name, generate(dim, boxes, max_steps, seed))``."""
    try:
        gen = importlib.import_module("agentgym.envs.sokoban_generation")
    except ModuleNotFoundError:
        return None
    func = getattr(gen, "generate_room", None)
    if func is None:
        return None
    params = inspect.signature(func).parameters

    def generate(dim: tuple[int, int], num_boxes: int, max_steps: int, seed: int) -> Any:
        kwargs: dict[str, Any] = {}
        if "max_steps" in params:
            kwargs["max_steps"] = max_steps
        kwargs["dim" if "dim" in params else "dim_room"] = dim
        kwargs["num_boxes"] = num_boxes
        if "rng" in params:
            kwargs["rng"] = np.random.default_rng(seed)
        elif "seed" in params:
            kwargs["seed"] = seed
        return func(**kwargs)

    return f"{gen.__name__}.{func.__name__}", generate


def bench_generator(
    generate: Generator, dim: tuple[int, int], boxes: int, max_steps: int, seconds: float
) -> tuple[float, int]:
    """Rooms per second (a failed attempt that raises counts as time spent, not as a room)."""
    rooms = failures = seed = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                generate(dim, boxes, max_steps, seed)
            rooms += 1
        except (RuntimeError, RuntimeWarning, ValueError):
            failures += 1
        seed += 1
    return rooms / (time.perf_counter() - start), failures


# ----------------------------------------------------------------------------- main


def _pin_one_core() -> str:
    if hasattr(os, "sched_setaffinity"):
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        return f"pinned to CPU {cpu}"
    return "not pinned"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="time per measurement")
    parser.add_argument("--policy", choices=["oracle", "random"], default="oracle")
    parser.add_argument("--ids", nargs="*", help="ids to measure (default: every registered id)")
    args = parser.parse_args(argv)

    pin = _pin_one_core()
    print(
        f"agentgym {agentgym.__version__}, python {sys.version.split()[0]}, numpy "
        f"{np.__version__}, gymnasium {gymnasium.__version__}; 1 thread, {pin}; "
        f"{args.seconds:g} s per measurement"
    )
    print(f"\nEnvironments ({args.policy} actions; only reset/step are timed)")
    header = f"{'id':<30} {'resets/s':>10} {'steps/s':>10} {'actions/s':>10}"
    print(header)
    print("-" * len(header))
    for env_id in args.ids or list(agentgym.registered_envs()):
        reason = _available(env_id)
        if reason:
            print(f"{env_id:<30} {'-':>10} {'-':>10} {'-':>10}   ({reason})")
            continue
        resets = bench_resets(env_id, args.seconds)
        steps, actions = bench_steps(env_id, args.seconds, args.policy)
        print(f"{env_id:<30} {resets:>10,.0f} {steps:>10,.0f} {actions:>10,.0f}")

    math_ids = [
        i for i in args.ids or list(agentgym.registered_envs()) if i.startswith("agentgym/Math")
    ]
    if math_ids:
        print("\nMath answer checks (math-verify; 3 answers per problem, 2 of them correct)")
        header = f"{'id':<30} {'checks/s':>10} {'correct':>10}"
        print(header)
        print("-" * len(header))
        for env_id in math_ids:
            if _available(env_id):
                continue
            rate, fraction = bench_answer_checks(env_id, args.seconds)
            print(f"{env_id:<30} {rate:>10,.0f} {fraction:>10.3f}")

    ours = our_generator()
    room_utils = load_gym_sokoban_room_utils()
    peer = "gym-sokoban " + importlib.metadata.version("gym-sokoban") if room_utils else None
    print("\nSokoban room generation (rooms/s, one room per seed)")
    print(
        f"  agentgym: {ours[0] if ours else 'not available (sokoban_generation not written yet)'}"
    )
    peer_text = f"{peer}, gym_sokoban/envs/room_utils.py generate_room" if peer else None
    print(f"  peer:     {peer_text or 'not installed (pip install gym-sokoban)'}")
    header = (
        f"{'room':<13} {'agentgym':>10} {'peer':>10} {'agentgym/peer':>14} {'peer failures':>14}"
    )
    print(header)
    print("-" * len(header))
    for dim, boxes, max_steps in SIZES:
        label = f"{dim[0]}x{dim[1]}, {boxes} box" + ("es" if boxes > 1 else "")
        ours_rate = peer_rate = None
        peer_failures = 0
        if ours:
            ours_rate = bench_generator(ours[1], dim, boxes, max_steps, args.seconds)[0]
        if room_utils is not None:
            generate = peer_generator(room_utils)
            peer_rate, peer_failures = bench_generator(
                generate, dim, boxes, max_steps, args.seconds
            )
        ratio = f"{ours_rate / peer_rate:.2f}x" if ours_rate and peer_rate else "-"
        print(
            f"{label:<13} {f'{ours_rate:,.0f}' if ours_rate else '-':>10} "
            f"{f'{peer_rate:,.0f}' if peer_rate else '-':>10} {ratio:>14} {peer_failures:>14}"
        )
    print(
        "  (peer failures: seeds where gym-sokoban raised instead of returning a room; "
        "their time is counted)"
    )
    if room_utils is not None:
        bench_peer_steps(args.seconds)
    return 0


def load_gym_sokoban_env() -> type:
    """gym-sokoban's ``SokobanEnv`` without running its package ``__init__``.

    Its renderer imports ``pkg_resources`` (gone from current setuptools) only for
    ``resource_filename(module_name, relative_path)``; a stand-in module with that one function
    (the file's own folder joined with the path) is installed in ``sys.modules`` for this
    benchmark process only.
    """
    import types

    spec = importlib.util.find_spec("gym_sokoban")
    root = Path(list(spec.submodule_search_locations)[0])
    shim = types.ModuleType("pkg_resources")
    shim.resource_filename = lambda module, rel: str(
        Path(sys.modules[module].__file__).parent / rel
    )
    sys.modules.setdefault("pkg_resources", shim)
    for name, path in (("gym_sokoban", root), ("gym_sokoban.envs", root / "envs")):
        package = types.ModuleType(name)
        package.__path__ = [str(path)]
        sys.modules.setdefault(name, package)
    from gym_sokoban.envs.sokoban_env import SokobanEnv

    return SokobanEnv


def bench_peer_steps(seconds: float) -> None:
    """Actions/s of agentgym/Sokoban-v0 against gym-sokoban's env (one action per step), both with
    random moves and their resets counted."""
    peer_env = load_gym_sokoban_env()(dim_room=(6, 6), num_boxes=1, max_steps=10)
    rng = np.random.default_rng(0)
    np.random.seed(0)  # gym-sokoban draws rooms from numpy's global generator
    rates = {}
    for mode in ("rgb_array", "tiny_rgb_array"):
        peer_env.reset()
        count, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            done = peer_env.step(int(rng.integers(1, 5)), observation_mode=mode)[2]
            count += 1
            if done:
                peer_env.reset()
        rates[mode] = count / (time.perf_counter() - start)
    env = gymnasium.make("agentgym/Sokoban-v0", action_format="raw", max_actions_per_turn=1)
    env.reset(seed=0)
    moves = ["Up", "Down", "Left", "Right"]
    count, seed, start = 0, 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        _, _, terminated, truncated, _ = env.step(moves[int(rng.integers(4))])
        count += 1
        if terminated or truncated:
            seed += 1
            env.reset(seed=seed)
    ours = count / (time.perf_counter() - start)
    print("\nSokoban 6x6/1 box, random single-action steps/s (resets included)")
    print(f"  agentgym/Sokoban-v0 (text observation):        {ours:>10,.0f}")
    for mode, rate in rates.items():
        print(
            f"  gym-sokoban ({mode + ' observation):':<29} {rate:>10,.0f}   ratio {ours / rate:.1f}x"
        )


if __name__ == "__main__":
    sys.exit(main())
