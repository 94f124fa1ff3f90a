"""Agents for the eval harness (``agentgym eval --agent SPEC``).

An agent answers a batch of :class:`AgentRequest` (one per live episode) with one action text each.
The harness (:mod:`agentgym.eval`) groups up to ``agent.batch_size`` episodes of one environment
and plays them in lock step (:func:`agentgym.lockstep.play_lockstep`, the trainer's loop too), so a
batched agent (a transformers model) answers one turn of every
episode with one ``generate`` call.

Agent specs (:func:`make_agent`):

* ``random``: uniform over ``info["valid_actions"]``, one action per turn, written in the env's
  action format. Where the action set is not finite (``valid_actions`` is ``None``, e.g.
  Countdown), it writes a random text of 1-8 characters drawn from letters, digits, spaces and
  ``+-*/()``: a random-text baseline that is almost always invalid. Its generator is
  ``numpy.random.default_rng([agent_seed, episode_seed])`` per episode, so its actions do not
  depend on batching or on which episodes ran before.
* ``oracle``: the environment's own ``oracle_answer()`` (privileged: it reads the state). An env
  without an oracle records an error for each episode.
* ``hf:PATH``: a local transformers causal LM (``PATH`` a checkpoint folder or ``embedded``, the
  SmolLM2-135M-Instruct that :func:`baselines.llm.policy.embedded_model_path` converts), played through
  the trainer's own generation path and token-level prompts (:class:`baselines.hf_agent.HFAgent`);
  greedy by default. Needs torch and transformers (``pip install 'agentgym[train]'``). The class
  lives in ``baselines`` (the LLM layer) and is found through the string entry point
  ``AGENT_ENTRY_POINTS["hf"]``, imported only when a spec names ``hf:`` (as Gymnasium imports an
  env's ``entry_point``): ``agentgym`` imports neither torch nor ``baselines``.
* ``cmd:COMMAND``: any program, in any language. It is started once (``shlex.split(COMMAND)``, no
  shell) and, for each turn, reads one JSON object on a line on stdin (see :func:`request_json`)
  and writes one line on stdout: the action text, or a JSON string literal (a line starting with
  ``"``) for an action that holds newlines. A program that exits, does not take its request and
  write its action within ``timeout`` seconds (one deadline per turn: a program that never reads
  its stdin cannot block eval on a full pipe), writes a line over ``max_line_bytes`` (16 MiB), or
  writes to a closed pipe gives an error for that episode and is started again for the next one. On
  Linux it runs under a small launcher (:mod:`agentgym.agent_launcher`), in a PID namespace of its
  own where the kernel allows one (with a user namespace mapping only the current uid and gid when
  not root), so whatever it starts, in any process group or session (``setsid``, a double fork,
  ``nohup``, SIGTERM ignored), is killed when the program exits, when the agent closes or restarts
  it, and when eval itself dies (SIGKILL too), even if the program kills its launcher: the launcher
  has no pid in the namespace, and the kernel kills the whole namespace when its init ends. Inside,
  the program's pids are the namespace's, while ``/proc`` shows the host's. Where the kernel refuses
  a namespace the launcher is a child subreaper instead, with one more limit: a program that kills
  its launcher (SIGKILL), or keeps it stopped (SIGSTOP again each time it runs) when eval dies
  without closing it, leaves what it started in other sessions running (a launcher stopped once is
  continued by eval's close, or, when eval dies, by SIGCONT, its parent-death signal). What it
  starts through a daemon outside its process tree (``docker run``, ``systemd-run``) is not
  covered. Elsewhere (not Linux) only its process group is killed. A program that cannot be
  started (the launcher says so, or says nothing within :data:`START_TIMEOUT_S` seconds) gives an
  error for that episode.
* ``module:callable`` or ``path/to/file.py:callable``: a Python object (``module`` importable, or
  a module in the current directory). An object (or class, instantiated without arguments) with an
  ``act(requests) -> list[str]`` method is used as a batched agent; any other callable is called
  once per request as ``callable(request) -> str``.

Example:
    >>> agent = make_agent("random")
    >>> agent.name
    'random'
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import selectors
import shlex
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agentgym.parsing import format_answer

__all__ = [
    "AgentRequest",
    "AgentError",
    "Agent",
    "RandomAgent",
    "OracleAgent",
    "CommandAgent",
    "CallableAgent",
    "make_agent",
    "request_json",
    "AGENT_ENTRY_POINTS",
    "load_entry_point",
]

#: Agent-spec prefixes whose agent lives outside ``agentgym``: prefix -> string entry point
#: ``"module:attribute"``, imported by :func:`load_entry_point` only when a spec uses the prefix
#: (as Gymnasium imports an environment's ``entry_point``). The class is called as
#: ``cls(rest_of_spec, seed=seed, **agent_kwargs)``. A static import here would make ``agentgym``
#: depend on ``baselines`` and torch (the import-linter contracts in pyproject.toml forbid it).
AGENT_ENTRY_POINTS: dict[str, str] = {"hf": "baselines.hf_agent:HFAgent"}


class AgentError(Exception):
    """An agent could not answer one request (recorded as that episode's error)."""


#: Keys of an :class:`AgentRequest` read as a mapping that are not its fields: the keys of
#: :func:`request_json` that it takes from ``info``.
_REQUEST_INFO_KEYS = (
    "valid_actions",
    "actions_left",
    "max_actions_per_turn",
    "last_action_valid",
    "invalid_reason",
)


@dataclass
class AgentRequest(Mapping):
    """What an agent sees when it must act in one episode.

    It is also a read-only mapping (``collections.abc.Mapping``) for agents written against the
    JSON form: ``request["observation"]``, ``"valid_actions" in request``, ``dict(request)``,
    ``keys()``, ``items()``, ``values()``, ``get()``, ``len()`` and iteration. Its keys are the
    fields below but ``env`` (privileged), then the keys of :func:`request_json` taken from
    ``info`` (``valid_actions``, ``actions_left``, ``max_actions_per_turn``,
    ``last_action_valid``, ``invalid_reason``). Equality stays the dataclass's (field by field,
    ``env`` included), so a request does not compare equal to ``dict(request)``.

    Attributes:
        env_id: the registered id.
        episode: index of the episode in its run (0-based).
        seed: the episode's reset seed.
        turn: the turn to play (1-based).
        observation: the latest observation.
        info: the latest ``info`` (from ``reset`` on turn 1, else from the last ``step``).
        last_reward: reward of the previous turn (``None`` on turn 1).
        messages: the chat so far (:meth:`agentgym.chat.ChatEpisode.messages`), ending with the
            user message this turn answers.
        instructions: the system-prompt material (``info["instructions"]`` of reset).
        action_format: ``"think_answer"``, ``"answer"`` or ``"raw"``.
        env: the unwrapped environment; only privileged agents (``oracle``) may read it.
    """

    env_id: str
    episode: int
    seed: int
    turn: int
    observation: str
    info: dict[str, Any]
    last_reward: float | None
    messages: list[dict[str, str]]
    instructions: str
    action_format: str
    env: Any = field(default=None, repr=False)

    def __getitem__(self, key: str) -> Any:
        """Read a key as from a plain dict (``request["observation"]``, ``request["valid_actions"]``).

        Raises:
            KeyError: no such key; the message lists them.
        """
        if isinstance(key, str) and key in self.__dataclass_fields__ and key != "env":
            return getattr(self, key)
        if key in _REQUEST_INFO_KEYS:
            return request_json(self)[key]
        raise KeyError(f"AgentRequest has no field {key!r}; fields: {sorted(self)}")

    def __iter__(self) -> Iterator[str]:
        """The keys: the fields in order (``env`` left out), then the ``info`` keys of the JSON
        form."""
        yield from (name for name in self.__dataclass_fields__ if name != "env")
        yield from _REQUEST_INFO_KEYS

    def __len__(self) -> int:
        return len(self.__dataclass_fields__) - 1 + len(_REQUEST_INFO_KEYS)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in set(self)


def request_json(request: AgentRequest) -> dict[str, Any]:
    """The JSON object a ``cmd:`` agent reads for ``request`` (one line on its stdin).

    Keys: ``env_id`` (str), ``episode`` (int), ``seed`` (int), ``turn`` (int, 1-based),
    ``observation`` (str), ``instructions`` (str), ``action_format`` (str), ``valid_actions``
    (list of str, or null when not finite), ``actions_left`` (int), ``max_actions_per_turn`` (int),
    ``last_reward`` (float or null), ``last_action_valid`` (bool or null),
    ``invalid_reason`` (str or null).
    """
    info = request.info
    return {
        "env_id": request.env_id,
        "episode": request.episode,
        "seed": request.seed,
        "turn": request.turn,
        "observation": request.observation,
        "instructions": request.instructions,
        "action_format": request.action_format,
        "valid_actions": info.get("valid_actions"),
        "actions_left": info.get("actions_left"),
        "max_actions_per_turn": info.get("max_actions_per_turn"),
        "last_reward": request.last_reward,
        "last_action_valid": info.get("action_is_valid") if request.turn > 1 else None,
        "invalid_reason": info.get("invalid_reason") if request.turn > 1 else None,
    }


class Agent:
    """Base class: ``act`` answers a batch of requests.

    Attributes:
        name: short name (shown on the leaderboard).
        description: one or two sentences on what the agent does.
        batch_size: most requests per ``act`` call (the harness plays this many episodes at once).
        settings: JSON-serialisable settings recorded in the result bundle.
    """

    name: str = "agent"
    description: str = ""
    batch_size: int = 1

    def __init__(self) -> None:
        self.settings: dict[str, Any] = {}

    def act(self, requests: Sequence[AgentRequest]) -> list[str | AgentError]:
        """One action text per request, in order; an :class:`AgentError` item fails that episode.

        Raising fails every episode of the batch.
        """
        raise NotImplementedError

    def close(self) -> None:
        """Release processes and memory (idempotent)."""


class RandomAgent(Agent):
    """Uniform over ``info["valid_actions"]``; random short text where the set is not finite."""

    name = "random"
    description = (
        "uniform over info['valid_actions'], one action per turn; a random 1-8 character text "
        "where the action set is not finite"
    )
    _ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789 +-*/()"

    def __init__(self, seed: int = 0):
        super().__init__()
        self.seed = int(seed)
        self.settings = {"seed": self.seed}
        self._rngs: dict[tuple[str, int, int], np.random.Generator] = {}

    def act(self, requests: Sequence[AgentRequest]) -> list[str | AgentError]:
        out: list[str | AgentError] = []
        for req in requests:
            key = (req.env_id, req.episode, req.seed)
            if req.turn == 1 or key not in self._rngs:
                self._rngs[key] = np.random.default_rng([self.seed, req.seed])
            action = self.choose(req, self._rngs[key])
            out.append(format_answer([action], req.action_format, think="random"))
        return out

    def choose(self, request: AgentRequest, rng: np.random.Generator) -> str:
        """One action (not wrapped in the action format) for ``request``, drawn with ``rng``
        (the episode's generator, ``numpy.random.default_rng([seed, episode seed])``). An
        environment whose action set is not finite subclasses this agent and draws from its
        observation instead (``WebShopRandomAgent``, ``MiniWoBRandomAgent``)."""
        valid = request.info.get("valid_actions")
        if valid:
            return str(valid[int(rng.integers(len(valid)))])
        length = int(rng.integers(1, 9))
        return "".join(self._ALPHABET[i] for i in rng.integers(len(self._ALPHABET), size=length))

    def close(self) -> None:
        self._rngs.clear()


class OracleAgent(Agent):
    """The environment's oracle (``env.oracle_answer()``): privileged, reads the state."""

    name = "oracle"
    description = "the environment's own oracle solver (reads the hidden state; an upper bound)"

    def act(self, requests: Sequence[AgentRequest]) -> list[str | AgentError]:
        out: list[str | AgentError] = []
        for req in requests:
            try:
                out.append(req.env.oracle_answer())
            except NotImplementedError:
                out.append(AgentError(f"{req.env_id} has no oracle"))
            except Exception as err:  # an oracle failure is this episode's error
                out.append(AgentError(f"oracle failed: {type(err).__name__}: {err}"))
        return out


class CallableAgent(Agent):
    """A Python callable ``fn(request) -> str``, called once per request."""

    def __init__(self, fn: Callable[[AgentRequest], str], name: str):
        super().__init__()
        self.fn = fn
        self.name = name
        self.description = (getattr(fn, "__doc__", None) or "").strip().split("\n")[0]

    def act(self, requests: Sequence[AgentRequest]) -> list[str | AgentError]:
        out: list[str | AgentError] = []
        for req in requests:
            try:
                action = self.fn(req)
            except Exception as err:
                # The whole traceback from the user's function down: the error must be fixable
                # from the message alone.
                trace = "".join(traceback.format_exception(err)).rstrip()
                out.append(AgentError(f"agent failed: {type(err).__name__}: {err}\n{trace}"))
                continue
            if isinstance(action, dict) and isinstance(action.get("action"), str):
                action = action["action"]  # {"action": "..."}: the JSON form of an answer
            if not isinstance(action, str):
                out.append(
                    AgentError(
                        f"{self.name} returned {type(action).__name__}, not str: return the "
                        "action text (or a dict {'action': text})"
                    )
                )
            else:
                out.append(action)
        return out


class CommandAgent(Agent):
    """An external program speaking JSON lines (see the module docstring).

    On Linux the program runs under :mod:`agentgym.agent_launcher` (which leads a session of its
    own; the program inherits the launcher's stdin and stdout, so nothing is relayed), in a new
    PID namespace where the kernel allows one: the launcher's child, the namespace's init (pid 1
    there, the program's parent), starts the program. Guarantee: once the program has exited, or
    :meth:`close` (or a restart after an error) has returned, or eval has died, every process the
    program started, whatever session, group or signal mask it chose, is killed: the program gets
    SIGTERM and 2 s to exit, then the whole namespace gets SIGKILL, and the launcher exits. The
    program cannot break this by killing its launcher: the launcher has no pid in the namespace,
    the kernel ignores SIGKILL sent to the init from inside, and kills every process of the
    namespace once the init ends (the init dies with the launcher). Without root the namespace
    needs a user namespace that maps only the current uid and gid (set-user-ID programs do not
    change ids in it). Inside, ``os.getpid()`` gives the namespace's pids while ``/proc`` (not
    remounted) shows the host's: a program that looks itself up there reads ``/proc/self``.
    Where the kernel refuses a namespace (user namespaces disabled), the launcher falls back to
    a child subreaper: every process that stays in its process tree is killed the same way, and
    the program may signal any process of its user, eval included (one that kills or stops eval
    ends or hangs the evaluation: the namespace is what keeps a hostile program's harm to its own
    episode); further, a program that SIGKILLs the launcher (its parent there) leaves what it started in another
    session running, and so does one that keeps it stopped (SIGSTOP again each time it runs)
    when eval dies without :meth:`close`. A stopped launcher gets SIGCONT from :meth:`close`
    (with the SIGTERM, and again while it waits; one still there 5 s after the program's 2 s is
    killed after every process below it) and from eval's death (its parent-death signal).
    Processes started through a daemon outside the tree (``docker run``, ``systemd-run``,
    ``at``) are not covered. Without the launcher (not Linux) the program leads a process group
    of its own and only that group is killed. A launcher that has not said within
    :data:`START_TIMEOUT_S` seconds whether the program started is ended as :meth:`close` ends
    one, and the start is an error. A line is read in chunks and each byte is searched for the
    newline once (:attr:`bytes_searched`).

    Args:
        command: the command line (split with :func:`shlex.split`; no shell).
        timeout: seconds for each turn: the program must take its request line (a full stdin
            pipe is never waited on longer) and write its action line within them.
        cwd: working folder of the program.
        max_line_bytes: longest action line, bytes; a longer one is an error for its episode.

    Raises:
        ValueError: an empty command, or ``max_line_bytes`` < 1.
    """

    def __init__(
        self,
        command: str,
        timeout: float = 30.0,
        cwd: str | None = None,
        max_line_bytes: int = 16 * 2**20,
    ):
        super().__init__()
        if isinstance(max_line_bytes, bool) or not isinstance(max_line_bytes, int):
            raise ValueError(f"max_line_bytes must be an int >= 1, got {max_line_bytes!r}")
        if max_line_bytes < 1:
            raise ValueError(f"max_line_bytes must be an int >= 1, got {max_line_bytes!r}")
        self.argv = shlex.split(command)
        if not self.argv:
            raise ValueError("cmd: needs a command line, e.g. cmd:'python my_agent.py'")
        self.command = command
        self.timeout = float(timeout)
        self.cwd = cwd
        self.name = f"cmd:{command}"
        self.description = f"external program `{command}` (JSON lines on stdin, actions on stdout)"
        self.max_line_bytes = max_line_bytes
        self.settings = {"command": command, "timeout": self.timeout}
        self._proc: subprocess.Popen[bytes] | None = None
        self._buffer = bytearray()
        self._searched = 0  # bytes at the start of _buffer known to hold no newline
        #: Bytes searched for a newline so far, over every line: each byte read is searched once.
        self.bytes_searched = 0

    def _start(self) -> subprocess.Popen[bytes]:
        if self._proc is None or self._proc.poll() is not None:
            self._stop()
            self._proc = self._popen()
            self._buffer = bytearray()
            self._searched = 0
        return self._proc

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        for stream in (proc.stdin, proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        _end(proc)

    def _popen(self) -> subprocess.Popen[bytes]:
        """Start the program (under the launcher where there is one), in a session of its own.

        Raises:
            AgentError: it cannot be started (the message says why).
        """
        options: dict[str, Any] = {
            "stdin": subprocess.PIPE,
            "stdout": subprocess.PIPE,
            "stderr": subprocess.DEVNULL,
            "cwd": self.cwd,
            "start_new_session": True,  # its own group: _stop ends what it started too
        }
        # SubprocessError too: Popen raises it when the child's exec-error report is garbled;
        # ValueError for a NUL byte in the command
        if not _LAUNCHER:
            try:
                return subprocess.Popen(self.argv, **options)
            except (OSError, ValueError, subprocess.SubprocessError) as err:
                raise AgentError(f"cannot start {self.command!r}: {err}") from err
        report, report_w = os.pipe()
        try:
            argv = [sys.executable, "-I", "-S", _LAUNCHER, str(report_w), str(os.getpid())]
            proc = subprocess.Popen([*argv, *self.argv], pass_fds=(report_w,), **options)
        except (OSError, ValueError, subprocess.SubprocessError) as err:
            os.close(report)
            raise AgentError(f"cannot start {self.command!r}: {err}") from err
        finally:
            os.close(report_w)
        try:  # one line: empty once the program has started, else why it could not be
            line = _read_report(report, time.monotonic() + START_TIMEOUT_S)
        finally:
            os.close(report)
        if line == b"\n":
            return proc
        _end(proc)  # a launcher that failed exits at once; a silent one is ended
        if line is None:
            failure = f"the launcher did not report within {START_TIMEOUT_S:g} s"
        elif not line.endswith(b"\n"):
            failure = f"the launcher ended before it reported (exit status {proc.returncode})"
        else:
            failure = line.decode("utf-8", "replace").strip() or "no reason given"
        raise AgentError(f"cannot start {self.command!r}: {failure}")

    def _write(self, proc: subprocess.Popen[bytes], data: bytes, deadline: float) -> None:
        """Write ``data`` to the program's stdin by ``deadline``: a program that does not read
        its stdin (its pipe full) gives an error, never a write that blocks for ever.

        Raises:
            AgentError: the pipe is closed, or still full at the deadline.
        """
        assert proc.stdin is not None
        fd = proc.stdin.fileno()
        os.set_blocking(fd, False)  # our end of the pipe only: select says when it takes more
        view = memoryview(data)
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_WRITE)
            while view:
                try:
                    view = view[os.write(fd, view) :]
                    continue
                except BlockingIOError:
                    pass
                except OSError as err:
                    raise AgentError(f"{self.command!r} stopped reading its stdin: {err}") from err
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    raise AgentError(
                        f"{self.command!r} read no request within {self.timeout:g} s (its stdin "
                        "is full)"
                    )

    def _read_line(self, proc: subprocess.Popen[bytes], deadline: float | None = None) -> bytes:
        assert proc.stdout is not None
        if deadline is None:
            deadline = time.monotonic() + self.timeout
        fd = proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while True:
                # only the bytes not searched yet: a long line costs its length, not its square
                end = self._buffer.find(b"\n", self._searched)
                self.bytes_searched += (end + 1 if end >= 0 else len(self._buffer)) - self._searched
                if end >= 0:
                    break
                self._searched = len(self._buffer)
                if self._searched > self.max_line_bytes:
                    raise AgentError(
                        f"{self.command!r} wrote over {self.max_line_bytes:,} bytes without a "
                        "newline (max_line_bytes)"
                    )
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    raise AgentError(f"{self.command!r} wrote no action within {self.timeout:g} s")
                chunk = os.read(fd, 65536)
                if not chunk:
                    # It is ending (or closed stdout and goes on): its status is awaited for what
                    # is left of the turn's deadline, however slowly a busy machine ends it.
                    try:
                        code = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                    except subprocess.TimeoutExpired:
                        raise AgentError(
                            f"{self.command!r} closed its stdout and was still running "
                            f"{self.timeout:g} s into the turn"
                        ) from None
                    raise AgentError(f"{self.command!r} closed its stdout (exit status {code})")
                self._buffer += chunk
        if end > self.max_line_bytes:
            raise AgentError(
                f"{self.command!r} wrote a line of {end:,} bytes, over max_line_bytes "
                f"({self.max_line_bytes:,})"
            )
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 1]
        self._searched = 0
        return line

    def _ask(self, req: AgentRequest) -> str:
        proc = self._start()
        # one deadline for the turn: reading the request and writing the action
        deadline = time.monotonic() + self.timeout
        self._write(proc, json.dumps(request_json(req)).encode() + b"\n", deadline)
        text = self._read_line(proc, deadline).decode("utf-8", errors="replace").rstrip("\r")
        if text.startswith('"'):
            try:
                decoded = json.loads(text)
            except json.JSONDecodeError as err:
                raise AgentError(f"{self.command!r} wrote a bad JSON string: {err}") from err
            if not isinstance(decoded, str):
                raise AgentError(f"{self.command!r} wrote JSON that is not a string")
            return decoded
        return text

    def act(self, requests: Sequence[AgentRequest]) -> list[str | AgentError]:
        out: list[str | AgentError] = []
        for req in requests:
            try:
                out.append(self._ask(req))
            except AgentError as err:
                self._stop()  # a fresh process for the next episode
                out.append(err)
        return out

    def close(self) -> None:
        self._stop()


#: Seconds the launcher has to report whether the program started (its one line on a pipe, sent
#: once it has started the program): one that has not (stopped by its program, stuck) is ended
#: with all below it, and the start is an error.
START_TIMEOUT_S = 30.0
#: Seconds between two SIGCONT to the launcher's group while eval waits for it to end.
CONT_EVERY_S = 0.2

#: The launcher program (:mod:`agentgym.agent_launcher`), run by path under ``python -I -S``;
#: ``None`` where it cannot work (no child subreapers: not Linux) or no interpreter is known.
_LAUNCHER: str | None = (
    str(Path(__file__).resolve().with_name("agent_launcher.py"))
    if sys.platform.startswith("linux") and sys.executable
    else None
)


def _signal_group(pgid: int, sig: int) -> None:
    """``killpg(pgid, sig)``; a group already gone is fine."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _read_report(fd: int, deadline: float) -> bytes | None:
    """The launcher's report on ``fd``: its line, newline included, or what came before EOF (no
    newline: the launcher, or the init, ended without one); None when neither came by
    ``deadline`` (a launcher stopped or stuck before it wrote, or a process that holds the pipe)."""
    line = b""
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            line += chunk
    return line


def _exited(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Whether ``proc`` has exited (and is reaped) within ``timeout`` seconds."""
    try:
        proc.wait(timeout=max(timeout, 0.0))
    except subprocess.TimeoutExpired:
        return False
    return True


def _end(proc: subprocess.Popen[bytes]) -> None:
    """End ``proc``, the launcher (or, without one, the program) leading a process group, and
    every process below it; wait for it.

    Its group (the launcher, and the program unless it left) gets SIGTERM and SIGCONT, SIGCONT
    again every :data:`CONT_EVERY_S` seconds while eval waits: in the fallback the program may
    have stopped its launcher (SIGSTOP: its parent, same user), even once more when it got that
    SIGTERM, and a stopped launcher acts on no signal. The launcher gives the program 2 s, kills
    its tree and exits as the program did. One that has not exited 5 s later (stuck, or stopped
    again and again) is still alive, so its subreaper holds the program's tree below it: eval
    kills that tree (:func:`_kill_below`), then the group, the launcher with it. The group's id
    is the launcher's (or program's) pid, reserved while any of the group lives."""
    if proc.poll() is None:
        _signal_group(proc.pid, signal.SIGTERM)
        _signal_group(proc.pid, signal.SIGCONT)
        deadline = time.monotonic() + 2 + (5 if _LAUNCHER else 0)
        while not _exited(proc, min(CONT_EVERY_S, deadline - time.monotonic())):
            if time.monotonic() >= deadline:
                _kill_below(proc.pid)  # a stuck launcher: kill what it would have
                break
            _signal_group(proc.pid, signal.SIGCONT)  # stopped again since
    _signal_group(proc.pid, signal.SIGKILL)  # what is left: processes the program started
    proc.wait()


def _kill_below(pid: int, within_s: float = 10.0) -> None:
    """SIGKILL every process below ``pid`` still alive, again and again (a process forked in
    between is found by the next round), until none is left alive or ``within_s`` seconds have
    passed. With ``pid`` a live launcher (its child subreaper), an orphan of the program's tree
    stays below it, whatever session it is in. It stops only after a listing in which none was
    alive: a process that exits between the listing and its kill (a chain of forks that exit)
    still counts, so its child, re-parented below ``pid``, is found by the next round. psutil
    checks before each kill that a pid is still the process it listed; one that cannot be killed
    (another user's) is skipped."""
    import psutil

    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            below = psutil.Process(pid).children(recursive=True)
        except psutil.Error:
            return
        alive = 0
        for child in below:
            try:
                if child.status() == psutil.STATUS_ZOMBIE:
                    continue
                child.kill()
            except psutil.AccessDenied:  # another user's: skipped
                continue
            except psutil.NoSuchProcess:  # gone since the listing: what it forked is found next
                pass
            alive += 1
        if not alive:  # a listing with none alive: nothing is left to fork
            return
        time.sleep(0.01)


def _put_cwd_on_path() -> None:
    """Let ``module:callable`` name a module in the current directory, as ``python -m agentgym``
    allows (``-m`` puts the cwd first on ``sys.path``) but the ``agentgym`` console script would
    not (its ``sys.path[0]`` is the scripts folder). Done only when a user's module is loaded."""
    cwd = os.getcwd()
    if not any(os.path.abspath(entry or os.curdir) == cwd for entry in sys.path):
        sys.path.insert(0, cwd)


def _attribute(obj: Any, attr: str, target: str) -> Any:
    """``obj.a.b`` for ``attr == "a.b"``.

    Raises:
        ValueError: a missing attribute (the message names ``target`` and ``attr``).
    """
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{target!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def load_entry_point(entry_point: str) -> Any:
    """The object a string entry point ``"module:attribute"`` names, its module imported now.

    Raises:
        ModuleNotFoundError: the module, or one it imports, is not installed.
        ValueError: not of the form ``module:attribute``, or no such attribute.
    """
    module, sep, attr = entry_point.partition(":")
    if not (sep and module and attr):
        raise ValueError(f"entry point {entry_point!r} is not of the form 'module:attribute'")
    return _attribute(importlib.import_module(module), attr, module)


def _load_object(target: str, attr: str) -> Any:
    if target.endswith(".py"):
        path = Path(target)
        if not path.is_file():
            raise ValueError(f"agent file {target!r} does not exist")
        spec = importlib.util.spec_from_file_location(f"_agentgym_agent_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    else:
        _put_cwd_on_path()
        try:
            module = importlib.import_module(target)
        except ModuleNotFoundError as err:
            raise ValueError(
                f"agent module {target!r} cannot be imported ({err}); give an importable "
                "module:callable or path/to/file.py:callable"
            ) from err
    return _attribute(module, attr, target)


def make_agent(spec: str, *, seed: int = 0, kwargs: dict[str, Any] | None = None) -> Agent:
    """Build the agent that ``spec`` names (see the module docstring).

    Args:
        spec: ``random``, ``oracle``, ``hf:PATH``, ``cmd:COMMAND``, ``module:callable`` or
            ``file.py:callable``.
        seed: the agent's own seed (random agent, sampling).
        kwargs: agent settings (``--agent-kw``): ``hf:`` takes
            :class:`baselines.hf_agent.HFAgent`'s keyword arguments, ``cmd:`` takes ``timeout``, ``cwd`` and ``max_line_bytes``; a Python class gets them as constructor arguments.

    Raises:
        ValueError: an unknown spec or a setting the agent does not take; the message lists the
            accepted forms.
    """
    kwargs = dict(kwargs or {})

    def no_kwargs(kind: str) -> None:
        if kwargs:
            raise ValueError(f"the {kind} agent takes no --agent-kw (got {sorted(kwargs)})")

    if spec == "random":
        no_kwargs("random")
        return RandomAgent(seed=seed)
    if spec == "oracle":
        no_kwargs("oracle")
        return OracleAgent()
    kind, sep, rest = spec.partition(":")
    if sep and kind == "hf" and not rest:
        raise ValueError("hf: needs a checkpoint folder or 'embedded', e.g. hf:embedded")
    if sep and kind in AGENT_ENTRY_POINTS:
        cls = load_entry_point(AGENT_ENTRY_POINTS[kind])
        try:
            return cls(rest, seed=seed, **kwargs)
        except TypeError as err:
            raise ValueError(f"bad --agent-kw for {kind}: {err}") from err
    if sep and kind == "cmd":
        unknown = set(kwargs) - {"timeout", "cwd", "max_line_bytes"}
        if unknown:
            raise ValueError(
                f"the cmd: agent takes only timeout=, cwd=, max_line_bytes= (got {sorted(unknown)})"
            )
        return CommandAgent(rest, **kwargs)
    if sep and rest and kind:
        obj = _load_object(kind, rest)
        if isinstance(obj, type):
            obj = obj(**kwargs)
        elif kwargs:
            raise ValueError(f"{spec} is not a class: it takes no --agent-kw")
        if hasattr(obj, "act"):
            agent = obj if isinstance(obj, Agent) else _wrap_duck_agent(obj)
            own = getattr(obj, "name", None)
            agent.name = own if isinstance(own, str) and own not in ("", Agent.name) else spec
            return agent
        if callable(obj):
            return CallableAgent(obj, name=spec)
        raise ValueError(f"{spec} is neither callable nor has an act() method")
    raise ValueError(
        f"unknown agent {spec!r}: give random, oracle, hf:PATH (PATH a checkpoint folder or "
        "'embedded'), cmd:COMMAND, module:callable or path/to/file.py:callable"
    )


def _wrap_duck_agent(obj: Any) -> Agent:
    """An object with ``act`` (not an :class:`Agent` subclass) as an Agent."""

    class _Duck(Agent):
        def act(self, requests: Sequence[AgentRequest]) -> list[str | AgentError]:
            return list(obj.act(requests))

        def close(self) -> None:
            if hasattr(obj, "close"):
                obj.close()

    agent = _Duck()
    # A ``description`` attribute, else the first line of the class's docstring (as for a
    # function agent).
    doc = (type(obj).__doc__ or "").strip().split("\n")[0]
    agent.description = getattr(obj, "description", "") or doc
    agent.batch_size = int(getattr(obj, "batch_size", 1))
    agent.settings = dict(getattr(obj, "settings", {}) or {})
    return agent
