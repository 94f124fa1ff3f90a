"""Mutual-information diagnostics of template collapse (RAGEN-2, "Reasoning Collapse in Agentic RL").

Template collapse: the policy's reasonings z stay diverse (high entropy within an input) but stop
depending on the input x: the mutual information I(X; Z) falls to zero, so z is a template that
could have been written for any prompt. Token entropy alone cannot see it; these diagnostics can.

Teacher-force every sampled reasoning z_m against every distinct prompt x_j of the sample, giving
the matrix ``loglik[m, j] = l_j(z_m) = log p(z_m | x_j)`` (:func:`score_matrix`); then
(:func:`mi_metrics`), with i(m) the prompt z_m was sampled from and w_j the mixture weights:

    marginal(z_m)  = log sum_j w_j exp(l_j(z_m))             (log p(z_m) under the prompt mixture)
    mi_estimate    = mean_m [ l_{i(m)}(z_m) - marginal(z_m) ]
                   = reasoning_entropy_est - conditional_entropy_est
    retrieval      = does argmax_j l_j(z_m) recover i(m)?

With uniform weights the marginal is ``logsumexp_j l_j(z_m) - log K`` exactly. Each term is the
pointwise MI of a sample (x, z) ~ p(x, z), so the mean is an unbiased Monte Carlo estimate of I(X; Z)
when the weights are the true prompt distribution, and ``mi_estimate <= log K`` always holds for
uniform weights (since l_{i(m)} <= logsumexp_j l_j).

:class:`ZScoreTracker` follows the MI z-score over training and raises a template-collapse flag.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch import Tensor

from baselines.losses import logprobs_from_logits

__all__ = ["mi_metrics", "ZScoreTracker", "score_matrix", "score_matrix_naive"]

# -inf log-likelihoods (impossible under a prompt) are replaced by this floor so the permutation
# null stays finite; exp(-1e30) is 0 in float64, so logsumexp and the MI estimate are unchanged.
_LOGLIK_FLOOR = -1e30
RETRIEVAL_KS = (1, 2, 4)


def _check_inputs(loglik: Tensor, prompt_index: Tensor) -> None:
    if loglik.dim() != 2 or loglik.shape[0] < 1 or loglik.shape[1] < 1:
        raise ValueError(f"loglik must have shape [M, K] with M, K >= 1; got {tuple(loglik.shape)}")
    num_z, num_prompts = loglik.shape
    if prompt_index.shape != (num_z,):
        raise ValueError(
            f"prompt_index must have shape [M]=[{num_z}]; got {tuple(prompt_index.shape)}"
        )
    if prompt_index.dtype.is_floating_point or prompt_index.dtype == torch.bool:
        raise ValueError(f"prompt_index must be an integer tensor; got {prompt_index.dtype}")
    if int(prompt_index.min()) < 0 or int(prompt_index.max()) >= num_prompts:
        raise ValueError(f"prompt_index values must be in [0, K) = [0, {num_prompts})")
    if torch.isnan(loglik).any() or torch.isposinf(loglik).any():
        raise ValueError("loglik must not hold NaN or +inf (log-likelihoods are <= 0 or finite)")


def _retrieval_credit(loglik: Tensor, matched: Tensor, k: int) -> Tensor:
    """Expected top-k hit of the matched prompt when ties are broken uniformly at random.

    With g prompts scoring strictly higher than the matched one and t prompts tied with it (itself
    included), a uniform random tie order puts it at rank g + 1, ..., g + t with equal probability,
    so P(rank <= k) = clamp((k - g) / t, 0, 1). All-equal rows give exactly k / K (chance).
    """
    greater = (loglik > matched[:, None]).sum(dim=1).to(loglik.dtype)
    ties = (loglik == matched[:, None]).sum(dim=1).to(loglik.dtype)
    return ((k - greater) / ties).clamp(0.0, 1.0)


def _mi_block(
    loglik: Tensor, prompt_index: Tensor, log_w: Tensor, perms: Tensor, suffix: str
) -> dict[str, float]:
    """MI, entropies and the permutation z-score of one (float64, floored) loglik matrix."""
    rows = torch.arange(loglik.shape[0])
    matched = loglik[rows, prompt_index]
    marginal = torch.logsumexp(loglik + log_w, dim=1)
    mi = float((matched - marginal).mean())
    # Null: the same matrix with the prompt labels shuffled (prompt counts, hence w, unchanged).
    null = (loglik[rows[None, :], prompt_index[perms]] - marginal[None, :]).mean(dim=1)
    null_mean = float(null.mean())
    null_std = float(null.std(unbiased=True)) if null.numel() > 1 else 0.0
    # Spreads at the level of float64 rounding of the log-likelihoods count as zero: otherwise a
    # matrix with equal columns (MI exactly 0) would divide rounding noise by rounding noise.
    real = loglik[loglik > _LOGLIK_FLOOR / 2]
    tol = 1e-12 * max(1.0, float(real.abs().max()) if real.numel() else 1.0)
    diff = mi - null_mean
    if null_std > tol:
        zscore = diff / null_std
    else:
        zscore = 0.0 if abs(diff) <= tol else math.copysign(math.inf, diff)
    return {
        f"mi_estimate{suffix}": mi,
        f"conditional_entropy_est{suffix}": float(-matched.mean()),
        f"reasoning_entropy_est{suffix}": float(-marginal.mean()),
        f"mi_zscore{suffix}": zscore,
        f"mi_null_mean{suffix}": null_mean,
        f"mi_null_std{suffix}": null_std,
        f"mi_pvalue{suffix}": float((1 + (null >= mi - 1e-12).sum()) / (null.numel() + 1)),
    }


def mi_metrics(
    loglik: Tensor,
    prompt_index: Tensor,
    lengths: Tensor | None = None,
    *,
    mixture: str = "empirical",
    num_permutations: int = 200,
    seed: int = 0,
) -> dict[str, float]:
    """MI estimate, retrieval accuracy, entropies and z-score from a reasoning-by-prompt matrix.

    Args:
        loglik: float ``[M, K]``: ``log p(z_m | x_j)`` summed over the tokens of z_m (e.g. from
            :func:`score_matrix`). ``-inf`` is allowed off the matched prompt.
        prompt_index: integer ``[M]``: the prompt each z_m was sampled from, in [0, K).
        lengths: optional integer ``[M]``, >= 1: token count of each z_m. When given, the
            ``*_per_token`` keys repeat the MI, entropies and z-score on ``loglik / lengths``.
        mixture: weights w_j of the marginal ``p(z) = sum_j w_j p(z | x_j)``:
            ``"empirical"`` (default): w_j = (number of z sampled from x_j) / M, the prompt
            distribution the sample was drawn from, so each term stays a pointwise MI when prompts
            have different multiplicities; ``"uniform"``: w_j = 1 / K. The two agree (exactly)
            when every prompt has the same number of samples.
        num_permutations: B, permutations of ``prompt_index`` for the null of the z-score (>= 2).
        seed: seed of the ``torch.Generator`` that draws the permutations.

    Returns:
        dict of floats:
        ``mi_estimate``: mean_m of ``l_{i(m)}(z_m) - log sum_j w_j exp(l_j(z_m))`` (nats).
        ``mi_upper_bound``: H(w), the entropy of the mixture weights; ``log K`` when uniform.
        ``conditional_entropy_est``: ``-mean_m l_{i(m)}(z_m)``, estimate of H(Z | X).
        ``reasoning_entropy_est``: ``-mean_m marginal(z_m)``, estimate of H(Z).
        ``retrieval_accuracy`` (and ``@2``, ``@4``): share of z whose own prompt is among the k
        highest ``l_j(z)``; ties are broken uniformly at random in expectation (fractional credit),
        so a z that scores the same under every prompt earns exactly k / K.
        ``retrieval_chance`` (and ``@2``, ``@4``): ``min(k / K, 1)``.
        ``retrieval_above_chance``: ``retrieval_accuracy - retrieval_chance``.
        ``mi_zscore``: ``(mi_estimate - mean(null)) / std(null)`` where null holds the MI estimate
        for B seeded random permutations of ``prompt_index`` (the marginal is unchanged by a
        permutation; only which column counts as matched moves). ~0 without dependence, large when
        reasonings identify their prompts. If the null has zero spread (below float64 rounding of
        the log-likelihoods) the z-score is 0 when the estimate equals it, else +-inf. Also ``mi_null_mean``, ``mi_null_std`` and ``mi_pvalue``
        (``(1 + #{null >= mi}) / (B + 1)``).
        ``num_reasonings`` M, ``num_prompts`` K; and the ``*_per_token`` keys when ``lengths``.

    Raises:
        ValueError: bad shapes, prompt indices out of range, NaN or +inf in ``loglik``,
            ``-inf`` at a matched position, lengths < 1, unknown mixture, num_permutations < 2.
    """
    _check_inputs(loglik, prompt_index)
    if mixture not in ("empirical", "uniform"):
        raise ValueError(f"mixture must be 'empirical' or 'uniform'; got {mixture!r}")
    if num_permutations < 2:
        raise ValueError(f"num_permutations must be >= 2; got {num_permutations}")
    num_z, num_prompts = loglik.shape
    ll = loglik.detach().to("cpu", torch.float64)
    idx = prompt_index.detach().to("cpu", torch.long)
    rows = torch.arange(num_z)
    if torch.isneginf(ll[rows, idx]).any():
        raise ValueError("loglik is -inf at a matched position: z_m is impossible under its prompt")
    ll = ll.clamp(min=_LOGLIK_FLOOR)

    if mixture == "empirical":
        weights = torch.bincount(idx, minlength=num_prompts).to(torch.float64) / num_z
    else:
        weights = torch.full((num_prompts,), 1.0 / num_prompts, dtype=torch.float64)
    log_w = weights.log()  # -inf for prompts without samples: they leave the mixture
    support = weights > 0
    upper = float(-(weights[support] * log_w[support]).sum())

    gen = torch.Generator().manual_seed(seed)
    perms = torch.stack([torch.randperm(num_z, generator=gen) for _ in range(num_permutations)])

    matched = ll[rows, idx]
    out: dict[str, float] = {"num_reasonings": float(num_z), "num_prompts": float(num_prompts)}
    out.update(_mi_block(ll, idx, log_w, perms, suffix=""))
    out["mi_upper_bound"] = upper if mixture == "empirical" else math.log(num_prompts)
    for k in RETRIEVAL_KS:
        key = "" if k == 1 else f"@{k}"
        out[f"retrieval_accuracy{key}"] = float(_retrieval_credit(ll, matched, k).mean())
        out[f"retrieval_chance{key}"] = min(k / num_prompts, 1.0)
    out["retrieval_above_chance"] = out["retrieval_accuracy"] - out["retrieval_chance"]

    if lengths is not None:
        if lengths.shape != (num_z,):
            raise ValueError(f"lengths must have shape [M]=[{num_z}]; got {tuple(lengths.shape)}")
        lens = lengths.detach().to("cpu", torch.float64)
        if (lens < 1).any():
            raise ValueError(
                "lengths must be >= 1 (a reasoning with no tokens has no per-token rate)"
            )
        out.update(_mi_block(ll / lens[:, None], idx, log_w, perms, suffix="_per_token"))
    return out


@dataclass
class _Evaluation:
    entropy: float
    retrieval_above_chance: float
    mi_estimate: float
    mi_upper_bound: float


@dataclass
class ZScoreTracker:
    """Moving average of the MI z-score and a template-collapse flag, over successive evaluations.

    Call :meth:`update` once per diagnostic evaluation with the dict of :func:`mi_metrics` and the
    policy's mean token entropy at that point of training.

    ``template_collapse`` is raised when, over the last ``window`` evaluations (and only once that
    many exist), both hold:

    1. entropy holding: ``min(entropy over the window) >= (1 - entropy_tol) * entropy at the
       window's first evaluation`` (the policy still writes diverse text);
    2. input dependence near chance at every evaluation of the window:
       ``retrieval_accuracy - retrieval_chance < retrieval_margin`` and
       ``mi_estimate < mi_fraction * mi_upper_bound``.

    An entropy that falls with the MI is a different failure (the policy collapsing to one
    output), so it does not raise this flag; nor does a window holding a NaN entropy.
    :meth:`state_dict` and :meth:`load_state_dict` save and restore it with a checkpoint.

    Attributes:
        ema_decay: in [0, 1): ``ema <- ema_decay * ema + (1 - ema_decay) * z``; the first
            z-score initialises the average.
        window: >= 1, number of recent evaluations the flag looks at.
        entropy_tol: in [0, 1], largest relative entropy drop over the window still "holding".
        retrieval_margin: retrieval accuracy above chance below which retrieval counts as chance.
        mi_fraction: in [0, 1], MI below this share of its upper bound counts as near zero.
    """

    ema_decay: float = 0.9
    window: int = 3
    entropy_tol: float = 0.1
    retrieval_margin: float = 0.05
    mi_fraction: float = 0.1
    zscore_ema: float | None = field(default=None, init=False)
    history: list[_Evaluation] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.ema_decay < 1.0:
            raise ValueError(f"ema_decay must be in [0, 1); got {self.ema_decay}")
        if self.window < 1:
            raise ValueError(f"window must be >= 1; got {self.window}")
        if not 0.0 <= self.entropy_tol <= 1.0:
            raise ValueError(f"entropy_tol must be in [0, 1]; got {self.entropy_tol}")
        if not 0.0 <= self.mi_fraction <= 1.0:
            raise ValueError(f"mi_fraction must be in [0, 1]; got {self.mi_fraction}")

    @property
    def template_collapse(self) -> bool:
        """The flag described in the class docstring, for the evaluations seen so far."""
        if len(self.history) < self.window:
            return False
        recent = self.history[-self.window :]
        entropies = [e.entropy for e in recent]
        if not all(math.isfinite(h) for h in entropies):
            return False  # an evaluation without an entropy (e.g. a skipped update): no verdict
        entropy_holding = min(entropies) >= (1.0 - self.entropy_tol) * entropies[0]
        near_chance = all(
            e.retrieval_above_chance < self.retrieval_margin
            and e.mi_estimate < self.mi_fraction * e.mi_upper_bound
            for e in recent
        )
        return entropy_holding and near_chance

    def state_dict(self) -> dict[str, object]:
        """The running state (EMA and history) as plain Python data, for a checkpoint."""
        return {
            "zscore_ema": self.zscore_ema,
            "history": [dataclasses.asdict(e) for e in self.history],
        }

    def load_state_dict(self, state: Mapping[str, object]) -> None:
        """Restore what :meth:`state_dict` returned (settings stay those of this tracker)."""
        self.zscore_ema = state["zscore_ema"]
        self.history = [_Evaluation(**e) for e in state["history"]]

    def update(self, metrics: Mapping[str, float], entropy: float) -> dict[str, float]:
        """Record one evaluation.

        Args:
            metrics: output of :func:`mi_metrics` (needs ``mi_zscore``, ``mi_estimate``,
                ``mi_upper_bound``, ``retrieval_accuracy``, ``retrieval_chance``).
            entropy: mean policy token entropy (nats) at this evaluation.

        Returns:
            ``collapse/mi_zscore``, ``collapse/mi_zscore_ema``, ``collapse/entropy`` and
            ``collapse/template_collapse`` (1.0 or 0.0).

        Raises:
            KeyError: a required metric is missing.
        """
        z = float(metrics["mi_zscore"])
        if self.zscore_ema is None or not math.isfinite(self.zscore_ema):
            self.zscore_ema = z
        else:
            self.zscore_ema = self.ema_decay * self.zscore_ema + (1.0 - self.ema_decay) * z
        self.history.append(
            _Evaluation(
                entropy=float(entropy),
                retrieval_above_chance=float(metrics["retrieval_accuracy"])
                - float(metrics["retrieval_chance"]),
                mi_estimate=float(metrics["mi_estimate"]),
                mi_upper_bound=float(metrics["mi_upper_bound"]),
            )
        )
        return {
            "collapse/mi_zscore": z,
            "collapse/mi_zscore_ema": self.zscore_ema,
            "collapse/entropy": float(entropy),
            "collapse/template_collapse": float(self.template_collapse),
        }


# ----------------------------------------------------------------------------------------------
# Scoring log p(z | x) with a causal LM
# ----------------------------------------------------------------------------------------------


@contextmanager
def _eval_mode(model: torch.nn.Module) -> Iterator[None]:
    """Eval mode (no dropout) for the duration, then the model's previous mode."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


def _cache_kwarg(model: torch.nn.Module) -> str:
    """Name of the KV-cache argument: ``cache`` (transformers >= 5.x) or ``past_key_values``."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _output_cache(output: object) -> object:
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values


def _check_ids(
    prompts_ids: Sequence[Sequence[int]], reasonings_ids: Sequence[Sequence[int]]
) -> None:
    if len(prompts_ids) == 0 or len(reasonings_ids) == 0:
        raise ValueError("need at least one prompt and one reasoning")
    for j, x in enumerate(prompts_ids):
        if len(x) == 0:
            raise ValueError(f"prompt {j} is empty; a prompt needs at least one token (e.g. BOS)")


def _pad_right(seqs: Sequence[Sequence[int]], device: torch.device) -> tuple[Tensor, Tensor]:
    """Right-pad with token 0 (never attended to, never scored); returns (ids, mask) [b, L]."""
    width = max(1, max(len(s) for s in seqs))
    ids = torch.zeros(len(seqs), width, dtype=torch.long)
    mask = torch.zeros(len(seqs), width, dtype=torch.long)
    for r, s in enumerate(seqs):
        ids[r, : len(s)] = torch.as_tensor(list(s), dtype=torch.long)
        mask[r, : len(s)] = 1
    return ids.to(device), mask.to(device)


def _model_device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


@torch.no_grad()
def score_matrix(
    model: torch.nn.Module,
    prompts_ids: Sequence[Sequence[int]],
    reasonings_ids: Sequence[Sequence[int]],
    batch_size: int = 16,
    temperature: float = 1.0,
) -> Tensor:
    """``log p(z_m | x_j)`` for every reasoning and prompt, reusing each prompt's KV cache.

    For each prompt x_j: one forward pass over x_j with ``use_cache=True`` gives its key/value
    cache and the next-token distribution for the first token of z. Then the reasonings are scored
    in batches of ``batch_size`` continuing from that cache, copied and repeated along the batch
    dimension (``Cache.batch_repeat_interleave``): the prompt is encoded K times in all, instead of
    M * K times as in :func:`score_matrix_naive`. Reasonings are sorted by length before batching
    (less padding), right-padded, given position ids ``len(x_j) + t`` and an attention mask of ones
    over the prompt and the real z tokens; padded positions are never scored. Log-probabilities are
    taken in float32 (:func:`baselines.losses.logprobs_from_logits`).

    ``prompts_ids[j]`` is every token that precedes the reasoning in the policy's context (chat
    template and the opening ``<think>`` included); ``reasonings_ids[m]`` the reasoning tokens.

    Args:
        model: a Hugging Face causal LM (``AutoModelForCausalLM``-compatible, with a cache that
            supports ``copy.deepcopy`` and ``batch_repeat_interleave``, e.g. ``DynamicCache``).
            Run in eval mode for the call; its previous mode is restored.
        prompts_ids: K token-id lists, each non-empty.
        reasonings_ids: M token-id lists; an empty one scores 0 (log 1).
        batch_size: reasonings per forward pass, >= 1.
        temperature: logits are divided by it (the sampling temperature: z is scored under the
            distribution it was sampled from), > 0.

    Returns:
        float32 CPU tensor ``[M, K]``.

    Raises:
        ValueError: no prompts or reasonings, an empty prompt, ``batch_size < 1`` or
            ``temperature <= 0``.
    """
    _check_ids(prompts_ids, reasonings_ids)
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1; got {batch_size}")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0; got {temperature}")
    device = _model_device(model)
    cache_kw = _cache_kwarg(model)
    num_z = len(reasonings_ids)
    order = sorted(range(num_z), key=lambda m: -len(reasonings_ids[m]))
    batches = []
    for start in range(0, num_z, batch_size):
        members = order[start : start + batch_size]
        ids, mask = _pad_right([reasonings_ids[m] for m in members], device)
        batches.append((torch.tensor(members), ids, mask))

    out = torch.zeros(num_z, len(prompts_ids), dtype=torch.float32)
    with _eval_mode(model):
        for j, prompt in enumerate(prompts_ids):
            prompt_len = len(prompt)
            x = torch.as_tensor([list(prompt)], dtype=torch.long, device=device)
            encoded = model(input_ids=x, use_cache=True)
            prompt_cache = _output_cache(encoded)
            # The prompt's last position predicts the first reasoning token.
            first_logprobs = torch.log_softmax(encoded.logits[0, -1].float() / temperature, dim=-1)
            for members, ids, mask in batches:
                b, width = ids.shape
                total = first_logprobs[ids[:, 0]] * mask[:, 0]
                if width > 1:
                    cache = copy.deepcopy(prompt_cache)
                    cache.batch_repeat_interleave(b)
                    inputs = ids[:, :-1]
                    attention = torch.cat(
                        [torch.ones(b, prompt_len, dtype=mask.dtype, device=device), mask[:, :-1]],
                        dim=1,
                    )
                    positions = torch.arange(prompt_len, prompt_len + width - 1, device=device)
                    logits = model(
                        input_ids=inputs,
                        attention_mask=attention,
                        position_ids=positions.unsqueeze(0).expand(b, -1),
                        use_cache=True,
                        **{cache_kw: cache},
                    ).logits
                    token_logprobs = logprobs_from_logits(logits.float() / temperature, ids[:, 1:])
                    total = total + (token_logprobs * mask[:, 1:]).sum(dim=1)
                out[members, j] = total.float().cpu()
    return out


@torch.no_grad()
def score_matrix_naive(
    model: torch.nn.Module,
    prompts_ids: Sequence[Sequence[int]],
    reasonings_ids: Sequence[Sequence[int]],
    batch_size: int = 16,
) -> Tensor:
    """Reference for :func:`score_matrix`: teacher-force ``x_j + z_m`` afresh for every pair.

    All M * K concatenations are right-padded and run in batches of ``batch_size`` without a
    cache; the log-probabilities of the z tokens (positions ``len(x_j) .. len(x_j) + len(z_m) - 1``,
    predicted by the logits one position earlier) are summed. Same arguments, result and errors
    as :func:`score_matrix`; K times more prompt tokens go through the model.
    """
    _check_ids(prompts_ids, reasonings_ids)
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1; got {batch_size}")
    device = _model_device(model)
    pairs = [(m, j) for j in range(len(prompts_ids)) for m in range(len(reasonings_ids))]
    out = torch.zeros(len(reasonings_ids), len(prompts_ids), dtype=torch.float32)
    with _eval_mode(model):
        for start in range(0, len(pairs), batch_size):
            chunk = pairs[start : start + batch_size]
            seqs = [list(prompts_ids[j]) + list(reasonings_ids[m]) for m, j in chunk]
            ids, mask = _pad_right(seqs, device)
            logits = model(input_ids=ids, attention_mask=mask, use_cache=False).logits
            token_logprobs = logprobs_from_logits(logits[:, :-1], ids[:, 1:])
            score_mask = torch.zeros_like(token_logprobs)
            for r, (m, j) in enumerate(chunk):
                first = len(prompts_ids[j]) - 1
                score_mask[r, first : first + len(reasonings_ids[m])] = 1.0
            totals = (token_logprobs * score_mask).sum(dim=1).float().cpu()
            for r, (m, j) in enumerate(chunk):
                out[m, j] = totals[r]
    return out
