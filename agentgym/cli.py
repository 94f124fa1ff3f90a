"""The ``agentgym`` command line: list the environments, play one by hand, watch the oracle solve one.

Examples::

    agentgym list
    agentgym play agentgym/Bandit-v0 --seed 0
    agentgym play Sokoban-v0 --seed 3 --kw max_turns=8       # the namespace may be left out
    agentgym solve agentgym/Bandit-v0 --seed 0
    agentgym export-sft --env agentgym/Bandit-v0 --episodes 256 --out runs/sft/bandit.jsonl

``play`` reads one line from stdin per turn and passes it to ``env.step`` as the action text. It
builds the environment with ``action_format="raw"`` unless told otherwise, so a person types
``Up || Left`` rather than ``<think>...</think><answer>Up || Left</answer>``.

Each subcommand is one ``_add_<name>(subparsers)`` function that declares its arguments and sets
``handler``; :data:`SUBCOMMANDS` lists them in the order ``--help`` shows (an ``eval`` subcommand
slots in the same way).
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from agentgym.registration import TaskParam

__all__ = ["main", "build_parser", "parse_kwargs", "resolve_env_id", "CLIError"]

#: What ``agentgym eval --threads`` (and ``--agent hf:...``) calls to set torch's CPU thread count,
#: as a string entry point imported at run time: torch threads belong to the LLM layer
#: (:mod:`baselines.llm.threads`), and ``agentgym`` imports neither torch nor ``baselines``.
TORCH_THREADS_ENTRY_POINT = "baselines.llm.threads:set_torch_threads"


class CLIError(Exception):
    """A user error: printed as ``agentgym: error: ...`` with exit status ``status``."""

    def __init__(self, message: str, status: int = 2):
        super().__init__(message)
        self.status = status


# ----------------------------------------------------------------------------- helpers


def _seed(text: str) -> int:
    """A reset seed: a whole number >= 0 (Gymnasium's rule)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"seed must be a whole number >= 0, got {text!r}"
        ) from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"seed must be a whole number >= 0, got {value}")
    return value


def _registered() -> Mapping[str, Any]:
    import agentgym  # imported here so that `agentgym --help` stays instant

    return agentgym.registered_envs()


def resolve_env_id(name: str) -> str:
    """The registered id that ``name`` means (``Bandit-v0`` -> ``agentgym/Bandit-v0``), by
    :func:`agentgym.registration.resolve_env_id`.

    Raises:
        CLIError: no such id; the message suggests close matches.
    """
    from agentgym.registration import UnknownEnvIdError  # imports agentgym: registers the ids
    from agentgym.registration import resolve_env_id as resolve

    try:
        return resolve(name)
    except UnknownEnvIdError as err:
        raise CLIError(str(err)) from None


def parse_kwargs(pairs: Sequence[str]) -> dict[str, Any]:
    """``["max_turns=8", "dim_room=(7, 7)", "name=x"]`` -> ``{"max_turns": 8, ...}``.

    A value is read as a Python literal (``8``, ``0.5``, ``True``, ``(7, 7)``, ``'x'``, ``None``)
    and, if it is not one, kept as the plain string.

    Raises:
        CLIError: a pair without ``=``, a key that is not a Python name, or a key given twice.
    """
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip()
        if not sep:
            raise CLIError(f"--kw expects key=value, got {pair!r}")
        if not key.isidentifier():
            raise CLIError(f"--kw key must be an argument name, got {key!r} in {pair!r}")
        if key in out:
            raise CLIError(f"--kw {key} is given twice")
        try:
            out[key] = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            out[key] = text
    return out


def _make_env(env_id: str, kwargs: dict[str, Any]) -> Any:
    """``gymnasium.make`` with the CLI's error messages."""
    import gymnasium

    from agentgym.registration import EnvKwargsError

    try:
        return gymnasium.make(env_id, **kwargs)  # runs the kwargs gate, check_env_kwargs
    except ModuleNotFoundError as err:
        raise CLIError(f"{env_id} is registered but cannot be imported: {err}", status=1) from err
    except EnvKwargsError as err:
        if err.unknown:
            raise CLIError(f"{env_id} takes no argument {err.key!r} (bad --kw)") from err
        raise CLIError(f"bad --kw for {env_id}: {err}") from err
    except TypeError as err:
        raise CLIError(f"bad --kw for {env_id}: {err}") from err
    except ValueError as err:
        raise CLIError(f"bad --kw for {env_id}: {err}") from err


def _env_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    kwargs = parse_kwargs(args.kw)
    if args.action_format is not None:
        if "action_format" in kwargs:
            raise CLIError("give the action format once: --action-format or --kw action_format=")
        kwargs["action_format"] = args.action_format
    return kwargs


def _format_kwargs(kwargs: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in kwargs.items()) or "(none)"


def _turns(n: int) -> str:
    return f"{n} turn" if n == 1 else f"{n} turns"


def _print_step(
    out: TextIO, reward: float, terminated: bool, truncated: bool, info: Mapping[str, Any]
) -> None:
    print(
        f"reward: {reward:g}   terminated: {terminated}   truncated: {truncated}   "
        f"success: {info['success']}   actions left: {info['actions_left']}",
        file=out,
    )
    if info["executed_actions"]:
        print(f"executed: {' || '.join(info['executed_actions'])}", file=out)
    if not info["action_is_valid"]:
        print(f"invalid: {info['invalid_reason']}", file=out)
    if info["dropped_actions"]:
        dropped = " || ".join(info["dropped_actions"])
        print(f"dropped (over {info['max_actions_per_turn']} per turn): {dropped}", file=out)


# ----------------------------------------------------------------------------- list


def _cmd_list(args: argparse.Namespace) -> int:
    from agentgym.registration import COMMON_TASK_PARAMS

    out = sys.stdout
    for env_id, entry in _registered().items():
        flag = "   [nondeterministic]" if entry.nondeterministic else ""
        print(f"{env_id}{flag}", file=out)
        print(f"    {entry.summary}", file=out)
        print(f"    fixed:    {_format_kwargs(entry.task_kwargs)}", file=out)
        print(f"    defaults: {_format_kwargs(entry.default_kwargs)}", file=out)
        print(f"    params:   {_format_params(entry.task_params, entry.task_kwargs)}", file=out)
    common = _format_params(COMMON_TASK_PARAMS, {})
    print(f"\nEvery id also takes (--kw, unless fixed above): {common}", file=out)
    return 0


def _format_params(params: Mapping[str, TaskParam], fixed: Mapping[str, Any]) -> str:
    """``name: type and bounds`` of each task parameter not fixed by the id, ``; ``-joined."""
    parts = [f"{k}: {p.describe()}" for k, p in params.items() if k not in fixed]
    return "; ".join(parts) or "(none)"


def _add_list(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "list",
        help="list every environment id",
        description="List every registered id with its summary, its fixed task arguments, "
        "the defaults that --kw may override and the task parameters --kw accepts (with their "
        "types and bounds).",
    )
    p.set_defaults(handler=_cmd_list)


# ----------------------------------------------------------------------------- play and solve


def _add_env_arguments(p: argparse.ArgumentParser, default_format: str | None) -> None:
    p.add_argument("env_id", metavar="ID", help="environment id, e.g. agentgym/Sokoban-v0")
    p.add_argument("--seed", type=_seed, default=0, help="reset seed (default 0)")
    p.add_argument(
        "--kw",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="constructor argument (repeatable), value as a Python literal, e.g. max_turns=8",
    )
    p.add_argument(
        "--action-format",
        choices=["raw", "answer", "think_answer"],
        default=default_format,
        help=f"how actions are written (default: {default_format or 'the environment default'})",
    )


def _cmd_play(args: argparse.Namespace) -> int:
    out, inp = sys.stdout, sys.stdin
    env_id = resolve_env_id(args.env_id)
    env = _make_env(env_id, _env_kwargs(args))
    try:
        observation, info = env.reset(seed=args.seed)
        print(f"== {env_id}, seed {args.seed} ==\n", file=out)
        print(info["instructions"], file=out)
        total, turn = 0.0, 0
        while True:
            turn += 1
            print(f"\n-- turn {turn} --\n{observation}", file=out)
            out.write("action> ")
            out.flush()
            line = inp.readline()
            if not line:
                print("\n(end of input: episode stopped)", file=out)
                return 0
            if not inp.isatty():  # echo piped input, so that the transcript reads like a session
                print(line.rstrip("\r\n"), file=out)
            observation, reward, terminated, truncated, info = env.step(line.rstrip("\r\n"))
            total += float(reward)
            _print_step(out, float(reward), terminated, truncated, info)
            if terminated or truncated:
                print(f"\n{observation}", file=out)
                _print_episode_end(out, turn, total, info)
                return 0
    finally:
        env.close()


def _print_episode_end(out: Any, turn: int, total: float, info: dict[str, Any]) -> None:
    print(
        f"\nEpisode over after {_turns(turn)}: return {total:g}, success {info['success']}",
        file=out,
    )


def _add_play(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "play",
        help="play an environment in the terminal",
        description="Play one episode by hand: each line you type is one turn's action text "
        "(e.g. 'Up || Left' in the raw format). Ends at the episode's end or end of input.",
    )
    _add_env_arguments(p, default_format="raw")
    p.set_defaults(handler=_cmd_play)


def _cmd_solve(args: argparse.Namespace) -> int:
    out = sys.stdout
    env_id = resolve_env_id(args.env_id)
    env = _make_env(env_id, _env_kwargs(args))
    try:
        observation, info = env.reset(seed=args.seed)
        print(f"== {env_id}, seed {args.seed}: the oracle plays ==", file=out)
        print(f"\n-- start --\n{observation}", file=out)
        total = 0.0
        for turn in range(1, 10_000):
            try:
                action = env.unwrapped.oracle_answer()
            except NotImplementedError as err:
                raise CLIError(f"{env_id} has no oracle", status=1) from err
            observation, reward, terminated, truncated, info = env.step(action)
            total += float(reward)
            print(f"\n-- turn {turn} --\naction: {action}", file=out)
            _print_step(out, float(reward), terminated, truncated, info)
            print(observation, file=out)
            if terminated or truncated:
                _print_episode_end(out, turn, total, info)
                return 0
        raise CLIError(f"the oracle of {env_id} did not finish", status=1)
    finally:
        env.close()


def _add_solve(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "solve",
        help="watch the oracle solve an episode",
        description="The environment's oracle plays one episode; each turn prints the action, "
        "the reward and the observation.",
    )
    _add_env_arguments(p, default_format="raw")
    p.set_defaults(handler=_cmd_solve)


# ----------------------------------------------------------------------------- eval


def _cmd_eval(args: argparse.Namespace) -> int:
    from agentgym.agents import load_entry_point
    from agentgym.eval import EvalError, evaluate
    from agentgym.threads import set_omp_wait_policy

    # Before any agent loads torch (hf:, or a Python agent of the user's): agentgym.threads.
    set_omp_wait_policy()

    env_ids = [resolve_env_id(name) for name in args.env]
    if args.threads < 0:
        raise CLIError(f"--threads must be >= 0 (0: half the CPUs), got {args.threads}")
    if args.agent.startswith("hf:") or args.threads:
        # Before the model loads; torch's one-thread-per-core default stalls under contention.
        # A string entry point: agentgym imports neither torch nor baselines.
        try:
            load_entry_point(TORCH_THREADS_ENTRY_POINT)(args.threads)
        except ModuleNotFoundError as err:
            raise CLIError(
                f"--threads needs torch ({err}); pip install 'agentgym[train]'", status=1
            ) from err
    try:
        bundle = evaluate(
            env_ids,
            args.agent,
            episodes=args.episodes,
            seed=args.seed,
            out=args.out,
            env_kwargs=parse_kwargs(args.kw),
            agent_kwargs=parse_kwargs(args.agent_kw),
            agent_seed=args.agent_seed,
            agent_name=args.agent_name,
            agent_description=args.agent_description,
            overwrite=args.overwrite,
            progress=not args.no_progress,
            chat_out=args.chat_out,
        )
    except (EvalError, ValueError, FileNotFoundError, ModuleNotFoundError) as err:
        raise CLIError(str(err)) from err
    except KeyboardInterrupt:
        print(
            f"interrupted: finished episodes are kept in {args.out}.partial.jsonl; "
            "run the same command to resume",
            file=sys.stderr,
        )
        return 130
    out = sys.stdout
    description = bundle["agent"]["description"] or (
        "no description: give one with --agent-description or a docstring"
    )
    print(f"agent: {bundle['agent']['name']}  ({description})", file=out)
    header = f"{'env':<32} {'success':>8} {'95% CI':>16} {'return':>8} {'turns':>6} {'valid':>7}"
    print(header + " errors", file=out)
    for run in bundle["runs"]:
        s = run["summary"]
        low, high = s["success_ci95"]
        print(
            f"{run['env_id']:<32} {s['success_rate']:>8.1%} "
            f"{f'[{low:.1%}, {high:.1%}]':>16} {s['mean_return']:>8.3f} "
            f"{s['mean_turns']:>6.2f} {s['valid_action_rate']:>7.1%} {s['errors']:>6}",
            file=out,
        )
    print(f"wrote {args.out}" + (f" and {args.chat_out}" if args.chat_out else ""), file=out)
    episodes = [ep for run in bundle["runs"] for ep in run["episodes"]]
    errored = [ep for ep in episodes if ep.get("error")]
    if errored and len(errored) == len(episodes):
        # Nothing was scored: a broken agent (a missing program, a raising function) must not
        # pass for a weak one in a script that checks the exit status.
        print(
            f"agentgym eval: every episode ({len(episodes)}) ended in an error, so nothing was "
            f"scored; fix the agent and rerun with --overwrite. The first error in full:\n"
            f"{errored[0]['error']}",
            file=sys.stderr,
        )
        return 1
    if errored:
        # Recorded, not fatal (an eval of many episodes should not die on one), but never silent.
        print(
            f"agentgym eval: {len(errored)} episode(s) ended in an error (counted as failures); "
            f"the first: {errored[0]['error']}",
            file=sys.stderr,
        )
    return 0


def _add_episodes_arguments(
    p: argparse.ArgumentParser,
    out_help: str,
    seed_flags: tuple[str, ...] = ("--seed",),
    seed_default: int = 0,
    seed_help: str = "first reset seed (default 0)",
) -> None:
    """``--env`` (repeatable), ``--episodes``, ``--seed``, ``--out`` and ``--kw``: the arguments
    of a command that plays episodes on seeds ``--seed, --seed + 1, ...`` of several ids
    (``seed_flags``, ``seed_default`` and ``seed_help`` rename and redocument ``--seed``; the
    value is ``args.seed`` in every case)."""
    p.add_argument(
        "--env", action="append", required=True, metavar="ID", help="environment id (repeatable)"
    )
    p.add_argument("--episodes", type=int, required=True, metavar="N", help="episodes per env")
    p.add_argument(*seed_flags, dest="seed", type=_seed, default=seed_default, help=seed_help)
    p.add_argument("--out", required=True, metavar="PATH", help=out_help)
    p.add_argument(
        "--kw",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="environment constructor argument for every --env (repeatable)",
    )


def _add_eval(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "eval",
        help="score an agent and write a replayable result bundle",
        description="Play --episodes episodes (reset seeds --seed, --seed+1, ...) on each --env "
        "and write a result bundle (JSON) that `python -m leaderboards submit` replays and "
        "checks. Agents: random, oracle, hf:PATH (a local transformers checkpoint, or 'embedded'"
        " for SmolLM2-135M-Instruct), cmd:COMMAND (a program reading JSON lines on stdin and "
        "writing one action per line), module:callable or file.py:callable. Rerunning the same "
        "command resumes an interrupted run.",
    )
    p.add_argument("--agent", required=True, metavar="SPEC", help="the agent (see above)")
    _add_episodes_arguments(p, out_help="result bundle to write (JSON)")
    p.add_argument(
        "--agent-kw",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="agent setting (repeatable), e.g. max_new_tokens=128 batch_size=16 for hf:",
    )
    p.add_argument("--agent-seed", type=int, default=0, help="the agent's own seed (default 0)")
    p.add_argument("--agent-name", default=None, help="name shown on the leaderboard")
    p.add_argument("--agent-description", default=None, help="one-line description")
    p.add_argument(
        "--chat-out", default=None, metavar="PATH", help="also write trajectories as chat JSONL"
    )
    p.add_argument(
        "--overwrite", action="store_true", help="discard an existing --out and its progress"
    )
    p.add_argument(
        "--threads",
        type=int,
        default=0,
        metavar="N",
        help="torch CPU threads for hf: and Python agents (default 0: half the CPUs, at least 1)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(handler=_cmd_eval)


# ----------------------------------------------------------------------------- export-sft


def _cmd_export_sft(args: argparse.Namespace) -> int:
    from agentgym.sft import export_sft

    env_ids = [resolve_env_id(name) for name in args.env]
    if args.episodes < 1:
        raise CLIError(f"--episodes must be >= 1, got {args.episodes}")
    try:
        counts = export_sft(
            env_ids,
            range(args.seed, args.seed + args.episodes),
            args.out,
            parse_kwargs(args.kw),
            only_success=not args.keep_failures,
            epsilon=args.epsilon,
        )
    except (ValueError, FileExistsError) as err:
        raise CLIError(str(err)) from err
    for env_id, count in counts.items():
        print(f"{env_id:<32} {count:>6} episodes", file=sys.stdout)
    print(f"wrote {args.out}", file=sys.stdout)
    return 0


def _add_export_sft(subparsers: Any) -> None:
    from agentgym.sft import SFT_SEED_START

    p = subparsers.add_parser(
        "export-sft",
        help="write oracle episodes as chat SFT data (JSONL)",
        description="The oracle plays --episodes episodes (reset seeds --seed-start, "
        "--seed-start+1, ...) on each --env; each episode is written as the chat the trainer's "
        "prompts are built from, every assistant turn '<think>reasoning naming what the oracle "
        "saw</think><answer>actions</answer>'. Fine-tune on it with `python -m baselines.sft`. "
        f"The default first seed, {SFT_SEED_START:,}, keeps SFT episodes apart from the RL "
        "trainer's training seeds (from rollout.train_seed, default 0) and validation seeds "
        "(from rollout.val_seed, default 1,000,000).",
    )
    _add_episodes_arguments(
        p,
        out_help="JSONL file to write (new)",
        seed_flags=("--seed-start", "--seed"),
        seed_default=SFT_SEED_START,
        seed_help=f"first reset seed (default {SFT_SEED_START}, agentgym.sft.SFT_SEED_START: "
        "disjoint from RL training and validation seeds; --seed is the same option)",
    )
    p.add_argument(
        "--keep-failures",
        action="store_true",
        help="also write episodes the oracle did not win (e.g. on slippery ice)",
    )
    p.add_argument(
        "--epsilon",
        type=float,
        default=0.0,
        help="probability that a turn plays uniformly drawn valid actions instead of the "
        "oracle's (a noisy oracle, for a warm start between random and the oracle; use with "
        "--keep-failures); default 0",
    )
    p.set_defaults(handler=_cmd_export_sft)


# ----------------------------------------------------------------------------- entry point

#: The subcommands, in ``--help`` order: each adds its parser and sets ``handler``.
SUBCOMMANDS: tuple[Callable[[Any], None], ...] = (
    _add_list,
    _add_play,
    _add_solve,
    _add_eval,
    _add_export_sft,
)


def build_parser() -> argparse.ArgumentParser:
    """The ``agentgym`` argument parser with every subcommand of :data:`SUBCOMMANDS`."""
    parser = argparse.ArgumentParser(
        prog="agentgym",
        description="Text-based multi-turn Gymnasium environments for RL on LLM agents.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in SUBCOMMANDS:
        add(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``agentgym`` command; returns the exit status (0 ok, 1 failure, 2 usage error)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except CLIError as err:
        print(f"agentgym: error: {err}", file=sys.stderr)
        return err.status
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`agentgym list | head -3`): no traceback. Python's own recipe:
        # point stdout at /dev/null so the interpreter's final flush cannot raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a command cut off by a pipe


if __name__ == "__main__":
    sys.exit(main())
