"""Data parallelism for the trainer: which rank does what, and the few collectives it needs.

The trainer runs as one process or as ``WORLD_SIZE`` processes started by ``torchrun`` (CPUs,
gloo) or ``accelerate launch`` (GPUs, nccl). Under a launcher (``WORLD_SIZE > 1``)
:meth:`Ranks.from_environment` starts ``accelerate.Accelerator(cpu=...)``, which sets up the
process group; everything else here is a plain function of ``(rank, world_size)``:

* :func:`block` splits ``n`` items (the step's groups, the validation episodes, a mini-batch's
  rows) into contiguous blocks, one per rank, sizes differing by at most one;
* :meth:`Ranks.gather` concatenates every rank's list in rank order on every rank
  (``accelerate.utils.gather_object``), so the filter, the advantages and the decision to update
  read the same whole batch everywhere;
* :meth:`Ranks.broadcast` sends rank 0's object to every rank (what rank 0 alone computes and
  control flow reads);
* :meth:`Ranks.sum_` SUM-reduces a tensor in place (``torch.distributed.all_reduce``): the
  rows a no-grad pass scored, each on its owner rank;
* :meth:`Ranks.data_parallel` hands a learner's module to PyTorch's engine for
  ``train.strategy`` (:data:`STRATEGIES`): ``DistributedDataParallel`` (replicas; the gradients
  all-reduced in buckets, overlapped with the backward pass) or FSDP2's ``fully_shard``
  (weights, gradients and AdamW state sharded); nothing here reduces a gradient by hand;
* :meth:`Ranks.full_weights` gathers sharded weights whole for the no-grad work (rollouts,
  scoring), :meth:`Ranks.full_state` and :meth:`Ranks.full_optimizer_state` gather what a
  checkpoint holds to rank 0 in the one-process layout.

With one process every method is the identity and nothing imports ``torch.distributed``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import torch

__all__ = [
    "STRATEGIES",
    "Ranks",
    "block",
    "check_launch",
    "rekey_optimizer_state",
    "world_size_from_environment",
]

#: ``train.strategy``: how the ranks share the learner (:meth:`Ranks.data_parallel`). ``ddp``:
#: replicas, gradients all-reduced by ``DistributedDataParallel``; ``fsdp2``: weights,
#: gradients and AdamW state sharded by PyTorch's ``fully_shard`` (verl's ``strategy: fsdp2``).
STRATEGIES = ("ddp", "fsdp2")


T = TypeVar("T")


def world_size_from_environment() -> int:
    """``WORLD_SIZE`` as a launcher sets it (``torchrun``, ``accelerate launch``), 1 when unset.

    Raises:
        ValueError: ``WORLD_SIZE`` is set but is not a positive integer.
    """
    raw = os.environ.get("WORLD_SIZE", "1")
    try:
        size = int(raw)
    except ValueError:
        size = 0
    if size < 1:
        raise ValueError(f"WORLD_SIZE={raw!r}: expected a positive integer (torchrun sets it)")
    return size


#: What ``accelerate launch`` sets for an engine this trainer does not take from accelerate, and
#: the engine's name: under these settings it would train as ``train.strategy`` says and not as
#: the launch asked, saying nothing (issue 42).
_UNSUPPORTED_LAUNCH = {
    "ACCELERATE_USE_FSDP": "FSDP",
    "ACCELERATE_USE_DEEPSPEED": "DeepSpeed",
    "ACCELERATE_USE_MEGATRON_LM": "Megatron-LM",
    "ACCELERATE_USE_PARALLELISM_CONFIG": "accelerate's parallelism config (TP/CP)",
}


def check_launch(environ: dict[str, str] | None = None) -> None:
    """Refuse a launch whose sharding or parallel engine the trainer would silently ignore.

    ``accelerate launch`` with an FSDP, DeepSpeed or Megatron-LM configuration (for example
    ``baselines/configs/trl/fsdp.yaml``, which is the TRL recipe's) tells the processes through
    ``ACCELERATE_USE_*`` variables; the trainer's sharding is its own switch,
    ``train.strategy`` (:meth:`Ranks.data_parallel`), which accelerate's settings would not
    reach.

    Raises:
        ValueError: one of those variables is ``true``; the message names the supported launches.
    """
    env = os.environ if environ is None else environ
    for variable, engine in _UNSUPPORTED_LAUNCH.items():
        if env.get(variable, "false").strip().lower() in ("true", "1", "yes"):
            raise ValueError(
                f"launched with {engine} ({variable}={env[variable]}), which python -m "
                "baselines.train does not take from accelerate: its ranks would not shard as "
                "that configuration says. Launch it with torchrun --nproc_per_node N -m "
                "baselines.train, or accelerate launch with a plain multi-GPU or multi-CPU "
                "configuration (no --use_fsdp, --use_deepspeed or --use_megatron_lm), and set "
                "train.strategy=fsdp2 for sharded weights, gradients and AdamW state (ddp: "
                "replicas, the default)"
            )


def rekey_optimizer_state(state: dict[str, Any], key: Any) -> dict[str, Any]:
    """An optimizer state dict with every parameter key ``k`` (in ``state`` and in each group's
    ``params``) replaced by ``key[k]``: a one-process ``optimizer.state_dict()`` (keys are
    positions in the groups) to the parameter-name keys of
    ``torch.distributed.checkpoint.state_dict`` and back."""
    return {
        "state": {key[k]: v for k, v in state["state"].items()},
        "param_groups": [
            {**group, "params": [key[k] for k in group["params"]]}
            for group in state["param_groups"]
        ],
    }


def block(n: int, rank: int, world_size: int) -> range:
    """The contiguous block of ``range(n)`` that ``rank`` of ``world_size`` takes.

    Block ``r`` is ``range(r * n // W, (r + 1) * n // W)``: the blocks cover ``range(n)`` once, in
    rank order, and their sizes differ by at most one (a rank may get an empty block when
    ``n < W``).

    Raises:
        ValueError: ``n < 0``, ``world_size < 1`` or ``rank`` outside ``[0, world_size)``.

    Example:
        >>> [list(block(5, r, 2)) for r in range(2)]
        [[0, 1], [2, 3, 4]]
    """
    if n < 0 or world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(
            f"block: need n >= 0, world_size >= 1 and 0 <= rank < world_size; got n={n}, "
            f"rank={rank}, world_size={world_size}"
        )
    return range(rank * n // world_size, (rank + 1) * n // world_size)


@dataclass
class Ranks:
    """This process's place among the trainer's processes.

    Attributes:
        rank: 0 .. ``world_size - 1`` (``RANK`` of the launcher).
        world_size: number of processes (1: no process group, every collective is the identity).
        accelerator: the ``accelerate.Accelerator`` that set up the process group, or None.
        strategy: ``train.strategy`` (:data:`STRATEGIES`); read with several processes only.
    """

    rank: int = 0
    world_size: int = 1
    accelerator: Any = None
    strategy: str = "ddp"
    _gathered: set[int] = field(default_factory=set, init=False, repr=False, compare=False)

    @classmethod
    def from_environment(cls, device: str, strategy: str = "ddp") -> Ranks:
        """One process, or this rank of a ``torchrun`` / ``accelerate launch`` run.

        With ``WORLD_SIZE > 1`` it starts ``accelerate.Accelerator(cpu=device == "cpu")``: gloo
        on CPUs, nccl on GPUs (each rank on ``cuda:LOCAL_RANK``, :attr:`device`).

        Args:
            device: ``model.device`` (``"auto"``, ``"cpu"`` or ``"cuda"``).
            strategy: ``train.strategy``, one of :data:`STRATEGIES`.

        Raises:
            ValueError: a bad ``WORLD_SIZE``, ``device="cuda"`` without a CUDA device, or a
                launch with an engine the trainer does not run (:func:`check_launch`).
        """
        check_launch()
        if strategy not in STRATEGIES:
            raise ValueError(f"train.strategy={strategy!r}: expected one of {STRATEGIES}")
        size = world_size_from_environment()
        if size == 1:
            return cls(strategy=strategy)
        from accelerate import Accelerator

        if device == "cuda" and not torch.cuda.is_available():
            raise ValueError(
                "model.device=cuda but no CUDA device is available; use model.device=cpu "
                "(torchrun on CPUs runs on gloo)"
            )
        accelerator = Accelerator(cpu=device == "cpu" or not torch.cuda.is_available())
        return cls(accelerator.process_index, accelerator.num_processes, accelerator, strategy)

    @property
    def is_main(self) -> bool:
        """Rank 0: the one that writes metrics, samples, dumps, plots and checkpoints."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def sharded(self) -> bool:
        """Several ranks under ``fsdp2``: the learner's weights are DTensor shards outside
        :meth:`full_weights`."""
        return self.distributed and self.strategy == "fsdp2"

    @property
    def device(self) -> str | None:
        """The accelerator's device (``cpu`` or ``cuda:LOCAL_RANK``), None with one process."""
        return None if self.accelerator is None else str(self.accelerator.device)

    def block(self, n: int) -> range:
        """This rank's contiguous block of ``range(n)`` (:func:`block`)."""
        return block(n, self.rank, self.world_size)

    def barrier(self) -> None:
        """Wait until every rank gets here (e.g. after rank 0 wrote a checkpoint)."""
        if self.distributed:
            self.accelerator.wait_for_everyone()

    def gather(self, items: list[T]) -> list[T]:
        """Every rank's ``items`` (picklable), concatenated in rank order, on every rank."""
        if not self.distributed:
            return list(items)
        from accelerate.utils import gather_object

        return list(gather_object(list(items)))

    def broadcast(self, obj: T) -> T:
        """Rank 0's ``obj`` (picklable) on every rank; other ranks' ``obj`` is ignored."""
        if not self.distributed:
            return obj
        from accelerate.utils import broadcast_object_list

        return broadcast_object_list([obj], from_process=0)[0]

    def broadcast_parameters(self, module: torch.nn.Module) -> None:
        """Copy rank 0's parameters and buffers of ``module`` to every rank, in place (so every
        rank starts from the same weights, whatever its own loading or initialisation did)."""
        if not self.distributed:
            return
        with torch.no_grad():
            for tensor in [*module.parameters(), *module.buffers()]:
                torch.distributed.broadcast(tensor.data, src=0)

    def close(self) -> None:
        """Leave the process group (the end of a run); nothing with one process."""
        if self.distributed and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()

    def sum_(self, tensor: torch.Tensor) -> torch.Tensor:
        """SUM-reduce ``tensor`` over ranks, in place; returns it. A CPU tensor under nccl (which
        reduces device tensors only) is reduced through a copy on this rank's device."""
        if not self.distributed:
            return tensor
        device = torch.device(self.device)
        if tensor.device != device and torch.distributed.get_backend() == "nccl":
            staged = tensor.to(device)
            torch.distributed.all_reduce(staged, op=torch.distributed.ReduceOp.SUM)
            tensor.copy_(staged.to(tensor.device))
        else:
            torch.distributed.all_reduce(tensor, op=torch.distributed.ReduceOp.SUM)
        return tensor

    def data_parallel(self, module: torch.nn.Module) -> torch.nn.Module:
        """``module`` under the run's strategy: ``ddp`` wraps it in
        ``torch.nn.parallel.DistributedDataParallel``, ``fsdp2`` shards it in place with
        ``torch.distributed.fsdp.fully_shard``; with one process ``module`` itself.

        DDP registers a hook on every trainable parameter and all-reduces the gradients in
        buckets as the backward pass fills them, overlapping the communication with the rest of
        the backward; under its ``no_sync()`` a backward only accumulates locally. Its
        construction broadcasts rank 0's parameters and buffers. Settings:
        ``find_unused_parameters=True``, so that a trainable parameter no pass reached on a rank
        is reduced as zero rather than stalling its bucket (and one reached nowhere keeps
        ``grad = None``, which AdamW skips as one process would), at the cost of one walk of the
        autograd graph per forward; ``forward_sync_buffers=False`` (the buffers, rotary
        frequencies, are constants, synced once at construction);
        ``gradient_as_bucket_view=True`` (the gradients are views into the all-reduce buckets:
        no second copy of them, 0.2 GB less peak RSS a rank on the main job); ``device_ids`` this
        rank's GPU under nccl, none on CPU (gloo).

        FSDP2 (``fully_shard``; the per-parameter sharding of torchtitan and verl's ``fsdp2``)
        makes each parameter a ``DTensor`` sharded on dim 0 over the ranks: each decoder layer
        (a class of the Hugging Face model's ``_no_split_modules``, what accelerate's and TRL's
        auto-wrap policy picks) is one unit, all-gathered for its forward and backward and freed
        after, and ``module`` is the root unit holding the rest (embeddings, final norm, LM and
        value heads). Gradients are reduce-scattered in every backward pass (each rank keeps
        its shard), so each rank holds 1/W of the weights, the gradients and the AdamW state
        built on them. Float32 shards; compute in bf16 through the workers'
        autocast as with one process (no ``MixedPrecisionPolicy``: the all-gathers move float32).
        It runs on CPUs over gloo as on GPUs over nccl. Every rank must run the same sequence of
        sharded forward and backward passes; no-grad work runs on gathered weights
        (:meth:`full_weights`). An optimizer must be built on the parameters ``fully_shard``
        leaves (:meth:`baselines.update._Worker.distribute`).

        Both reduce by averaging over ranks: the trainer's losses are shares of the whole
        mini-batch (the sum over ranks is wanted), so they are multiplied by :attr:`world_size`
        before the backward pass (exact for a power-of-two world size). The forward pass must go
        through the returned module (DDP arms its reducer there, FSDP2 gathers the root's
        parameters there): the learners wrap their whole scoring pass in one module
        (:class:`baselines.update.ActorPass`).

        Raises:
            ValueError: ``module`` has no trainable parameter (nothing to reduce).
        """
        if not self.distributed:
            return module
        if not any(p.requires_grad for p in module.parameters()):
            raise ValueError("data_parallel: the module has no trainable parameter")
        if self.strategy == "fsdp2":
            from torch.distributed.fsdp import fully_shard

            units = set()
            for sub in module.modules():
                units.update(getattr(sub, "_no_split_modules", None) or ())
            for sub in list(module.modules()):
                if sub is not module and type(sub).__name__ in units:
                    fully_shard(sub)
            fully_shard(module)
            return module
        from torch.nn.parallel import DistributedDataParallel

        device = torch.device(self.device)
        return DistributedDataParallel(
            module,
            device_ids=[device.index] if device.type == "cuda" else None,
            find_unused_parameters=True,
            forward_sync_buffers=False,
            gradient_as_bucket_view=True,
        )

    @contextmanager
    def full_weights(self, *modules: torch.nn.Module | None) -> Iterator[None]:
        """Under ``fsdp2``, every FSDP unit of ``modules`` all-gathered on entry (collective:
        every rank enters together) and kept whole (``set_reshard_after_forward(False)``), so
        that any number of no-grad passes, generation included, run on each rank alone without
        a collective; resharded on exit, each unit's setting restored (the root's: no reshard
        after forward, FSDP2's default for it). A unit already gathered by an enclosing call is
        left to it. Without sharding (``ddp``, one process) it does nothing. Memory: each
        rank's shards stay beside the gathered whole (float32), ``1 + 1/N`` times the weights.
        """
        if not self.sharded:
            yield
            return
        from torch.distributed.fsdp import FSDPModule

        roots = {id(top) for top in modules if top is not None}
        units = [m for top in modules if top is not None for m in top.modules()]
        units = [m for m in units if isinstance(m, FSDPModule) and id(m) not in self._gathered]
        self._gathered.update(id(m) for m in units)
        try:
            for unit in units:
                unit.set_reshard_after_forward(False, recurse=False)
                unit.unshard()
            yield
        finally:
            for unit in units:
                unit.reshard()
                unit.set_reshard_after_forward(id(unit) not in roots, recurse=False)
                self._gathered.discard(id(unit))

    def full_state(self, module: torch.nn.Module) -> dict[str, torch.Tensor]:
        """``module``'s whole state dict, float32 CPU tensors, on rank 0 (``{}`` on the others;
        collective under ``fsdp2``: ``torch.distributed.checkpoint.state_dict.
        get_model_state_dict`` with ``full_state_dict=True, cpu_offload=True``); its
        ``state_dict()`` without sharding."""
        if not self.sharded:
            return module.state_dict()
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        return get_model_state_dict(module, options=options)

    def full_optimizer_state(
        self, module: torch.nn.Module, optimizer: torch.optim.Optimizer
    ) -> dict[str, Any]:
        """``optimizer.state_dict()`` as one process would write it (states and groups indexed
        by position in the groups), whole, on rank 0 (``{}`` on the others); collective under
        ``fsdp2`` (``get_optimizer_state_dict``, whose keys are parameter names, renumbered), so
        a checkpoint reads the same at any world size and strategy."""
        if not self.sharded:
            return optimizer.state_dict()
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            get_optimizer_state_dict,
        )

        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        named = get_optimizer_state_dict(module, optimizer, options=options)
        if not self.is_main:
            return {}
        index: dict[str, int] = {}
        for group in named["param_groups"]:
            for name in group["params"]:
                index.setdefault(name, len(index))
        return rekey_optimizer_state(named, index)

    def sum_floats(self, values: dict[str, float]) -> dict[str, float]:
        """Per key, the sum over ranks of ``values`` (keys missing on a rank count 0), the same
        float on every rank (summed in rank order from gathered copies)."""
        if not self.distributed:
            return dict(values)
        total: dict[str, float] = {}
        for part in self.gather([values]):
            for key, value in part.items():
                total[key] = total.get(key, 0.0) + value
        return total
