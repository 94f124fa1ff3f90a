"""Crash-safe trainer files: checkpoints and ``metrics.jsonl`` that survive a SIGKILL anywhere.

Layout in ``train.out_dir``::

    checkpoint/            the newest complete checkpoint (what --resume and eval read)
    checkpoint-<step>/     older ones, kept while ``train.keep_checkpoints`` allows
    .checkpoint.tmp/       a checkpoint being written (never read unless complete)
    .checkpoint.old/       the previous checkpoint while the new one is renamed into place

A checkpoint folder is *complete* when it holds ``state.json``; that file is written last and
atomically (temp file + ``os.replace``), after every other file has been flushed to disk, so its
presence proves the rest is there. :func:`save_checkpoint` swaps folders with two renames; a kill
between them leaves no ``checkpoint/`` but two complete copies, and :func:`recover` (run before
every save and on ``--resume``) puts the newest complete copy back in place and clears the rest.

``metrics.jsonl`` is only ever appended to (one ``write`` of one whole line, flushed and fsynced);
on resume, :func:`truncate_metrics_after` rewrites it through a temp file and a rename, so a kill
during the rewrite leaves the old file whole. A line cut by a kill during an append does not parse
and is dropped at that rewrite (its step had no checkpoint yet, so it runs again).

Nothing is written through a symbolic link: temp files are created with ``O_CREAT | O_EXCL |
O_NOFOLLOW`` (:func:`open_new_file`; a leftover at the temp path, a planted link included, is
unlinked first), ``metrics.jsonl`` is appended to with ``O_NOFOLLOW``, and a run (fresh or
``--resume``) refuses a folder that holds a symbolic link anywhere in it
(:func:`refuse_symlinks`, :class:`SymlinkInRunFolder`, naming the link), so a prepared folder
cannot make the trainer replace files outside it. The one exception is Weights & Biases' own
links inside ``wandb/`` that point inside ``wandb/`` (its ``latest-run``).

The trainer's run folder and checkpoint contents live here too: :func:`prepare_run_folder` (fresh or
``--resume``: recovery, the same-run check, ``config.yaml`` and ``provenance.json``),
:func:`write_learner_files` and :func:`read_learner_files` (weights, tokenizer, optimizer states,
value head, critic model). torch, the critic's file helpers and agentgym are imported inside
those functions, so the modules that read metrics or write samples through this one stay light.

Fault injection for tests: set ``AGENTGYM_CRASH_AT`` to a point name of :data:`CRASH_POINTS` and
the process SIGKILLs itself when it reaches that point (optionally ``name@N``: at the N-th time,
counting from 1).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import re
import shutil
import signal
import sys
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "CRASH_POINTS",
    "crash_point",
    "recover",
    "begin_resume",
    "save_checkpoint",
    "append_metrics_line",
    "truncate_metrics_after",
    "read_metrics_lines",
    "write_text_durable",
    "checkpoint_step",
    "check_same_run",
    "SymlinkInRunFolder",
    "refuse_symlinks",
    "open_new_file",
    "add_run_options",
    "resumed_config",
    "RESUMABLE_TRAIN_KEYS",
    "prepare_run_folder",
    "write_learner_files",
    "read_learner_files",
]

#: Every point where a test may kill the trainer (in the order one save/resume passes them).
CRASH_POINTS: tuple[str, ...] = (
    "metrics_append",  # half of a metrics line written
    "metrics_appended",  # a whole line written, no checkpoint yet
    "save_staging",  # staging folder made, weights half written
    "save_staged",  # staging complete (state.json written)
    "save_old_moved",  # checkpoint/ renamed to .checkpoint.old; staging not yet in place
    "save_new_moved",  # staging is checkpoint/; .checkpoint.old still there
    "save_pruned",  # older copies pruned
    "resume_metrics_tmp",  # resume: the rewritten metrics written to a temp file, not renamed
)

_counts: dict[str, int] = {}


def crash_point(name: str) -> None:
    """SIGKILL this process if ``AGENTGYM_CRASH_AT`` names ``name`` (tests only; no-op otherwise)."""
    want = os.environ.get("AGENTGYM_CRASH_AT")
    if not want:
        return
    target, _, nth = want.partition("@")
    if target != name:
        return
    _counts[name] = _counts.get(name, 0) + 1
    if _counts[name] >= int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _fsync_tree(path: Path) -> None:
    """Flush every file under ``path`` to disk (so a later rename never exposes empty files)."""
    for item in sorted(path.rglob("*")):
        if item.is_file():
            with open(item, "rb") as fh:
                os.fsync(fh.fileno())
    for folder in [path, *[p for p in path.rglob("*") if p.is_dir()]]:
        _fsync_dir(folder)


class SymlinkInRunFolder(ValueError):
    """A run folder holds a symbolic link: the trainer would write through it (outside the folder)."""


#: The folder of a run where a tracker keeps links of its own (``wandb/latest-run``).
_TRACKER_LINKS = "wandb"


def _link_refusal(link: Path, why: str) -> SymlinkInRunFolder:
    try:
        target = f" (to {os.readlink(link)!r})"
    except OSError:
        target = ""
    return SymlinkInRunFolder(
        f"{link} is a symbolic link{target}: {why}; a run folder holds only real files and "
        "folders, so that nothing is written outside it. Remove the link, or run in another "
        "out_dir"
    )


def refuse_symlinks(out_dir: str | os.PathLike[str]) -> None:
    """Refuse a run folder holding a symbolic link anywhere in it (the folder itself may be one).

    Weights & Biases keeps links of its own inside ``wandb/`` (``latest-run``): those that point
    inside ``wandb/`` are allowed; ``wandb`` itself must be a real folder.

    Raises:
        SymlinkInRunFolder: the first link found, by path, with where it points.
    """
    out = Path(out_dir)
    if not out.is_dir():
        return
    tracker = out / _TRACKER_LINKS  # textual: os.walk names every path under `out` as given
    for top, dirs, files in os.walk(out):  # followlinks=False: a linked folder is not entered
        for name in sorted(dirs + files):
            path = Path(top) / name
            if not path.is_symlink():
                continue
            if Path(top).is_relative_to(tracker) and path.resolve().is_relative_to(
                tracker.resolve()
            ):
                continue  # wandb's own link, inside the real folder wandb/ (a link is refused)
            raise _link_refusal(path, "the run would write through it")


def open_new_file(path: Path) -> int:
    """A descriptor of a new, empty regular file at ``path`` (``0o666 & ~umask``), for writing.

    Whatever was at ``path`` (a temp file a killed run left, or a link someone planted) is
    unlinked first (a link itself, never its target), then ``O_CREAT | O_EXCL | O_NOFOLLOW``
    create the file: if anything appears at ``path`` in between, the open fails rather than
    writing through it.

    Raises:
        OSError: ``path`` cannot be created (a folder is there, or something appeared there).
    """
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.open(path, flags, 0o666)


def write_text_durable(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically and durably (temp file, fsync, rename, fsync dir).

    The temp file is made by :func:`open_new_file`; the rename replaces ``path`` itself (a link
    there is replaced, its target untouched)."""
    tmp = path.with_name(f".{path.name}.tmp")
    with os.fdopen(open_new_file(tmp), "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def checkpoint_step(folder: Path) -> int | None:
    """The step of a *complete* checkpoint folder, or None (missing or incomplete)."""
    try:
        return int(json.loads((folder / "state.json").read_text())["step"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _older(out_dir: Path) -> list[tuple[int, Path]]:
    found = []
    for p in out_dir.glob("checkpoint-*"):
        match = re.fullmatch(r"checkpoint-(\d+)", p.name)
        if match and p.is_dir():
            found.append((int(match.group(1)), p))
    return sorted(found)


def _prune(out_dir: Path, keep: int) -> None:
    """Keep ``keep - 1`` older copies beside ``checkpoint/`` (``keep`` counts all checkpoints)."""
    older = _older(out_dir)
    for _, path in older[: max(0, len(older) - (keep - 1))]:
        shutil.rmtree(path, ignore_errors=True)


def _retire(out_dir: Path, folder: Path, keep: int) -> None:
    """Move a complete older checkpoint to ``checkpoint-<step>/`` (if kept) or delete it."""
    step = checkpoint_step(folder)
    if keep > 1 and step is not None:
        target = out_dir / f"checkpoint-{step:06d}"
        shutil.rmtree(target, ignore_errors=True)
        os.replace(folder, target)
    else:
        shutil.rmtree(folder, ignore_errors=True)


def recover(out_dir: str | os.PathLike[str], keep: int = 1) -> int | None:
    """Bring the checkpoint folders of ``out_dir`` back to a consistent state after any crash.

    The newest complete one among ``checkpoint/``, ``.checkpoint.tmp/`` and ``.checkpoint.old/``
    becomes ``checkpoint/``; incomplete ones are deleted; other complete ones are retired (kept
    as ``checkpoint-<step>/`` while ``keep`` allows).

    Returns:
        The step of ``checkpoint/`` afterwards, or None when there is no complete checkpoint.
    """
    out = Path(out_dir)
    main = out / "checkpoint"
    candidates = [main, out / ".checkpoint.tmp", out / ".checkpoint.old"]
    complete = [(checkpoint_step(p), p) for p in candidates if p.is_dir()]
    for step, path in complete:
        if step is None:
            shutil.rmtree(path, ignore_errors=True)
    complete = sorted(((s, p) for s, p in complete if s is not None), key=lambda x: -x[0])
    if not complete:
        return None
    best_step, best = complete[0]
    if best != main:
        if main.is_dir():
            _retire(out, main, keep)
        os.replace(best, main)
    for _, path in complete[1:]:
        if path.exists() and path != main:
            _retire(out, path, keep)
    _prune(out, keep)
    _fsync_dir(out)
    return best_step


def begin_resume(out_dir: str | os.PathLike[str], keep: int = 1) -> bool:
    """Recover ``out_dir`` for ``--resume``; True when the run must start again from step 0.

    That is the case when the run was started (``config.yaml`` is there) but killed before its
    first checkpoint was complete: nothing is lost by running step 0 again.

    Raises:
        SymlinkInRunFolder: the folder holds a symbolic link (:func:`refuse_symlinks`).
    """
    out = Path(out_dir)
    if not out.is_dir():
        return False
    refuse_symlinks(out)
    step = recover(out, keep)
    return step is None and (out / "config.yaml").is_file()


def save_checkpoint(out_dir: str | os.PathLike[str], write: Any, step: int, keep: int = 1) -> Path:
    """Write a checkpoint of ``step`` crash-safely and make it ``checkpoint/``.

    Args:
        out_dir: the run folder.
        write: ``write(folder: Path) -> dict`` writes the model files into ``folder`` and returns
            the JSON state to store (``step`` is added).
        step: the training step the checkpoint holds (0-based, the last finished one).
        keep: checkpoints to keep in all (``checkpoint/`` plus ``keep - 1`` older ones), >= 1.

    Returns:
        The ``checkpoint/`` path.
    """
    out = Path(out_dir)
    recover(out, keep)
    staging = out / ".checkpoint.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    crash_point("save_staging")
    state = dict(write(staging))
    state["step"] = step
    _fsync_tree(staging)
    write_text_durable(staging / "state.json", json.dumps(state))  # last: marks it complete
    crash_point("save_staged")
    main = out / "checkpoint"
    old = out / ".checkpoint.old"
    if main.exists():
        os.replace(main, old)
        crash_point("save_old_moved")
    os.replace(staging, main)
    _fsync_dir(out)
    crash_point("save_new_moved")
    if old.exists():
        _retire(out, old, keep)
    _prune(out, keep)
    crash_point("save_pruned")
    return main


def read_metrics_lines(path: Path) -> list[dict[str, Any]]:
    """The parsed lines of ``metrics.jsonl``; a line cut by a crash (does not parse) is skipped."""
    rows = []
    if not path.exists():
        return rows
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and "step" in row:
            rows.append(row)
    return rows


def append_metrics_line(path: Path, line: str) -> None:
    """Append one whole line (``line`` without its newline) and fsync it."""
    data = (line + "\n").encode("utf-8")
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise _link_refusal(path, "the metrics would be appended to its target") from None
        raise
    with os.fdopen(fd, "ab") as fh:
        if os.environ.get("AGENTGYM_CRASH_AT", "").startswith("metrics_append"):
            fh.write(data[: len(data) // 2])
            fh.flush()
            crash_point("metrics_append")
            fh.write(data[len(data) // 2 :])
        else:
            fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    crash_point("metrics_appended")


def truncate_metrics_after(path: Path, start_step: int) -> int:
    """Keep the lines of steps ``< start_step`` (and drop cut lines), rewriting atomically.

    Returns:
        The number of lines kept.
    """
    rows = [r for r in read_metrics_lines(path) if r["step"] < start_step]
    text = "".join(json.dumps(r, allow_nan=False) + "\n" for r in rows)
    tmp = path.with_name(f".{path.name}.tmp")
    with os.fdopen(open_new_file(tmp), "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    crash_point("resume_metrics_tmp")
    os.replace(tmp, path)
    _fsync_dir(path.parent)
    return len(rows)


def check_same_run(
    saved: dict[str, Any],
    now: dict[str, Any],
    section: str,
    resumable: frozenset[str],
    defaults: dict[str, Any] | None = None,
) -> None:
    """A resumed run must be the same run: only ``section``'s keys in ``resumable`` may change.

    A key that ``saved`` lacks was added to the configuration after the run started; it counts
    as its value in ``defaults`` (a new key's default keeps what earlier versions computed, e.g.
    ``algorithm.critic: head``).

    Args:
        saved: the run's ``config.yaml`` as written when it started (sections of keys).
        now: the configuration given to the resumed run, same layout.
        section: the run's own section (``"train"`` or ``"sft"``).
        resumable: its keys that steer how long the run goes and what it writes.
        defaults: the default configuration, same layout (``None``: a missing key is ``None``).

    Raises:
        ValueError: another setting differs; the message names it and the allowed ones.
    """
    allowed = ", ".join(f"{section}.{key}" for key in sorted(resumable))
    for name, values in now.items():
        for key, value in values.items():
            if name == section and key in resumable:
                continue
            kept = saved.get(name) or {}
            before = kept[key] if key in kept else ((defaults or {}).get(name) or {}).get(key)
            if before != value:
                raise ValueError(
                    f"--resume: {name}.{key} was {before!r} in this run and is {value!r} now; "
                    f"a resumed run keeps its settings (only {allowed} may change): start a new "
                    f"run in another {section}.out_dir to change it"
                )


def saved_config(overrides: list[str], key: str, default: str) -> Path | None:
    """The ``config.yaml`` of the run folder that ``overrides`` name (``key=FOLDER``, else
    ``default``), or None when it has none: what ``--resume`` without ``--config`` continues
    from (the run's own settings, the overrides applied on top).

    Raises:
        SymlinkInRunFolder: the folder holds a symbolic link (:func:`refuse_symlinks`).
    """
    folder = default
    for override in overrides:
        name, _, value = override.partition("=")
        if name.strip() == key:
            folder = value.strip()
    refuse_symlinks(folder)  # before its config.yaml is read
    path = Path(folder) / "config.yaml"
    return path if path.is_file() else None


def add_run_options(
    parser: argparse.ArgumentParser, key: str, config_help: str, checkpoints: str = ""
) -> None:
    """The options of a command that runs (and resumes) a run: ``--config`` (``config_help``),
    ``--resume`` (continue the run in the folder ``key`` names, from its last checkpoint,
    ``checkpoints`` saying when those are written) and the ``section.key=value`` overrides; read
    them with :func:`resumed_config`."""
    parser.add_argument("--config", default=None, help=config_help)
    parser.add_argument(
        "--resume",
        action="store_true",
        help=f"continue the run in {key} from its last checkpoint{checkpoints}; without --config, "
        "with the settings it saved (its config.yaml) and the key=value overrides on top",
    )
    parser.add_argument(
        "overrides", nargs="*", metavar="section.key=value", help=f"e.g. {key}=runs/mine"
    )


def resumed_config(
    args: argparse.Namespace, key: str, default: str
) -> tuple[str | Path | None, list[str]]:
    """The config file a run starts from and the overrides on top, from the options of
    :func:`add_run_options` (``args.config``, ``args.resume``, ``args.overrides``): ``config`` as
    given; without one, a resumed run continues with the settings it saved
    (:func:`saved_config`; its folder is ``key``, ``default`` unless an override names it),
    that folder pinned as ``key`` and the key=value overrides (e.g. a longer schedule) on top.

    Raises:
        SymlinkInRunFolder: the folder holds a symbolic link (:func:`refuse_symlinks`).
    """
    config, overrides = args.config, list(args.overrides)
    if not args.resume or config is not None:
        return config, overrides
    base = saved_config(overrides, key, default)
    if base is None:
        return None, overrides
    return base, [f"{key}={base.parent}", *overrides]


# ------------------------------------------------------------------ the trainer's run folder

#: Settings a resumed training run may change (they steer output and stopping, or how the ranks
#: share the work, not what a step computes).
RESUMABLE_TRAIN_KEYS = frozenset(
    {
        "steps",
        "threads",
        "keep_checkpoints",
        "final_optimizer_state",
        "max_steps_without_update",
        "max_steps_without_signal",
        "reward_variance_stop",
        "report_to",
        "samples_per_step",
        "save_every",
        "strategy",
    }
)


def prepare_run_folder(
    out_dir: Path,
    settings: dict[str, Any],
    defaults: dict[str, Any],
    *,
    resume: bool,
    keep: int,
    ranks: Any,
) -> bool:
    """Make ``out_dir`` ready for :class:`baselines.trainer.Trainer`, fresh or resumed.

    Refuses symbolic links (:func:`refuse_symlinks`); on ``resume`` puts the newest complete
    checkpoint back in place (:func:`begin_resume`; rank 0 alone moves files, the others wait
    for it), and a run that stopped during its first step starts again from step 0. Then rank 0
    checks that a resumed run is the same run (:func:`check_same_run` with
    :data:`RESUMABLE_TRAIN_KEYS`) and writes ``config.yaml`` and ``provenance.json`` (the code
    that runs: commit, uncommitted changes, library versions; :mod:`agentgym.provenance`).

    Args:
        out_dir: ``train.out_dir``.
        settings: the run's configuration as a dict (``config_to_dict``).
        defaults: the default configuration, same layout (keys older runs lack).
        resume: ``--resume``.
        keep: ``train.keep_checkpoints``.
        ranks: :class:`baselines.distributed.Ranks` (``is_main``, ``broadcast``, ``barrier``).

    Returns:
        Whether the run continues from ``out_dir/checkpoint``.

    Raises:
        FileExistsError: ``out_dir`` already holds a run and ``resume`` is False.
        SymlinkInRunFolder: ``out_dir`` holds a symbolic link.
        FileNotFoundError: ``resume`` is True but there is no checkpoint.
    """
    from agentgym import provenance  # agentgym's envs: not for plots.py, which reads this module

    metrics_path, checkpoint_dir = out_dir / "metrics.jsonl", out_dir / "checkpoint"
    refuse_symlinks(out_dir)  # fresh or resumed: nothing is written through a link
    resume_from_scratch = False
    if ranks.is_main:
        resume_from_scratch = resume and begin_resume(out_dir, keep)
    resume_from_scratch = ranks.broadcast(resume_from_scratch)
    if resume and not resume_from_scratch and not (checkpoint_dir / "state.json").is_file():
        raise FileNotFoundError(f"--resume: no checkpoint in {checkpoint_dir}")
    if resume_from_scratch:
        resume = False
        if ranks.is_main:
            print(
                f"--resume: {out_dir} has no complete checkpoint yet (the run stopped "
                "during its first step); starting again from step 0",
                file=sys.stderr,
            )
            truncate_metrics_after(metrics_path, 0)
    elif not resume and metrics_path.exists():
        raise FileExistsError(
            f"{out_dir} already holds a run; pass --resume to continue it or choose "
            "another train.out_dir"
        )
    ranks.barrier()  # every rank has checked before rank 0 writes
    config_path = out_dir / "config.yaml"
    if ranks.is_main:
        out_dir.mkdir(parents=True, exist_ok=True)
        if (resume or resume_from_scratch) and config_path.is_file():
            saved = yaml.safe_load(config_path.read_text())
            check_same_run(saved, settings, "train", RESUMABLE_TRAIN_KEYS, defaults)
        write_text_durable(config_path, yaml.safe_dump(settings))
        provenance.record(out_dir, resumed=resume, write=write_text_durable)
    ranks.barrier()
    return resume


def write_learner_files(
    staging: Path,
    *,
    model: Any,
    tokenizer: Any,
    lora: bool,
    optimizer: Any,
    value_head: Any,
    critic: Any,
    critic_optimizer: Any,
    with_optimizer: bool,
    states: dict[str, Any] | None = None,
) -> None:
    """The trainer's weights and optimizer states in a checkpoint folder being written.

    ``model.safetensors`` (with LoRA: ``adapter/`` and the base weights under their plain
    names), the tokenizer, ``optimizer.pt`` (if ``with_optimizer``), ``value_head.pt`` (PPO,
    ``critic: head``), ``critic.safetensors`` and ``critic_optimizer.pt`` (``critic: model``).
    ``states``: whole state dicts gathered from sharded modules (``train.strategy=fsdp2``,
    :meth:`baselines.trainer.Trainer._sharded_states`: ``model``, ``value_head``,
    ``optimizer``, ``critic``, ``critic_optimizer``) written in place of the objects' own, so
    the files are the one-process ones; None: the objects' own.
    """
    import torch

    from baselines.llm.critic import save_trainable

    states = states or {}
    if lora:
        model.save_pretrained(staging / "adapter")
        # The base weights under their own names: get_base_model() holds peft's injected layers
        # (q_proj.base_layer.weight, q_proj.lora_A...), which a plain model loading this folder
        # (a LoRA resume) would not find, initialising them anew.
        base = model.get_base_model()
        plain = {
            k.replace(".base_layer.", "."): v
            for k, v in base.state_dict().items()
            if ".lora_" not in k
        }
        base.save_pretrained(staging, state_dict=plain, safe_serialization=True)
    else:
        model.save_pretrained(staging, safe_serialization=True, state_dict=states.get("model"))
    tokenizer.save_pretrained(staging)

    def state_of(name: str, part: Any) -> Any:
        return states[name] if name in states else part.state_dict()

    if with_optimizer:
        torch.save(state_of("optimizer", optimizer), staging / "optimizer.pt")
    if value_head is not None:
        torch.save(state_of("value_head", value_head), staging / "value_head.pt")
    if critic is not None:  # algorithm.critic=model: weights and AdamW state
        save_trainable(critic, staging / "critic.safetensors", states.get("critic"))
        if with_optimizer:
            torch.save(
                state_of("critic_optimizer", critic_optimizer), staging / "critic_optimizer.pt"
            )


def read_learner_files(
    folder: Path,
    *,
    optimizer: Any,
    value_head: Any,
    critic: Any,
    critic_optimizer: Any,
    device: Any,
    optimizer_states: dict[str, Any] | None = None,
    say: bool = True,
) -> dict[str, Any]:
    """Load what :func:`write_learner_files` wrote (the policy's weights are loaded with the
    model) into the given optimizer, value head and critic; returns ``state.json``. A checkpoint
    without optimizer state (``train.final_optimizer_state=false``) restarts AdamW's moments.

    ``optimizer_states``: a dict (sharded training, ``train.strategy=fsdp2``) into which the
    optimizer states are read to the CPU (``"optimizer"``, ``"critic_optimizer"``) instead of
    being loaded, for :meth:`baselines.update._Worker.distribute` to split into the shards;
    the caller passes it on rank 0 and an optimizer of None on the others, which read nothing.
    ``say``: print the notes on missing optimizer state (rank 0 of several: the others not).
    """
    import torch

    from baselines.llm.critic import load_trainable

    def load_optimizer(name: str, target: Any) -> None:
        if optimizer_states is not None:
            optimizer_states[name] = torch.load(folder / f"{name}.pt", map_location="cpu")
        elif target is not None:
            target.load_state_dict(torch.load(folder / f"{name}.pt", map_location=device))

    state = json.loads((folder / "state.json").read_text())
    if (folder / "optimizer.pt").is_file():
        load_optimizer("optimizer", optimizer)
    elif say:
        print(
            f"note: {folder} holds no optimizer state (saved with "
            "train.final_optimizer_state=false): AdamW restarts from zero moments",
            file=sys.stderr,
        )
    if value_head is not None:
        value_head.load_state_dict(torch.load(folder / "value_head.pt", map_location=device))
    if critic is not None:
        load_trainable(critic, folder / "critic.safetensors")
        if (folder / "critic_optimizer.pt").is_file():
            load_optimizer("critic_optimizer", critic_optimizer)
        elif say:
            print(
                f"note: {folder} holds no critic optimizer state: the critic's AdamW restarts "
                "from zero moments",
                file=sys.stderr,
            )
    return state
