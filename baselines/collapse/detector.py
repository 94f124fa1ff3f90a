"""The collapse detector: :class:`ZScoreTracker` follows the MI z-scores over training and gives
each evaluation a state (:data:`STATES`): dependent, collapsed (template collapse, a flag with
hysteresis), degenerate (input-blind noise), format-collapsed, never dependent, too small a
sample, or undecided, telling a policy that collapsed from one that never depended on its input,
wrote noise, or stopped writing reasonings. See
:mod:`baselines.collapse.mi` for the estimates it reads (RAGEN-2,
``ragen/trainer/collapse_metrics.py``).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from baselines.collapse.mi import RAGEN_STD_EPS

__all__ = [
    "STATES",
    "DetectorSettings",
    "ZScoreTracker",
    "mi_fraction_upper_bound",
]

#: The states :class:`ZScoreTracker` gives each evaluation (``collapse/state_<name>`` one-hot).
STATES = (
    "dependent",
    "collapsed",
    "degenerate",
    "format_collapsed",
    "never_dependent",
    "insufficient_sample",
    "undecided",
)


_NO_MI_STATES = ("format_collapsed", "insufficient_sample")


@dataclass
class _Evaluation:
    """What the tracker keeps of one evaluation (defaults: fields a checkpoint from before the
    states did not save)."""

    entropy: float
    retrieval_above_chance: float = math.nan
    mi_estimate: float = math.nan
    mi_upper_bound: float = math.nan
    mi_pvalue: float = math.nan
    mi_stderr: float = math.nan
    ragen_mi_zscore: float = math.nan
    num_reasonings: float = math.inf
    num_prompts: float = math.inf
    valid_thinking_rate: float = math.nan
    reference_nll: float = math.nan
    state: str = ""

    @property
    def fraction(self) -> float:
        """MI / its ceiling (0 when the ceiling is 0: one prompt)."""
        return self.mi_estimate / self.mi_upper_bound if self.mi_upper_bound > 0 else 0.0


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def mi_fraction_upper_bound(
    estimates: Sequence[float],
    stderrs: Sequence[float],
    ceilings: Sequence[float],
    confidence: float = 0.95,
) -> float:
    """One-sided upper confidence bound of the mean MI / ceiling over a window of evaluations.

    With f_i = I_i / C_i (``mi_estimate / mi_upper_bound``) and s_i = se_i / C_i (``mi_stderr``
    over the ceiling), the window's mean fraction f = mean_i f_i has the standard error
    ``s = sqrt(sum_i s_i^2) / n`` (independent evaluations), and its normal-based bound is

        ucb = f + z_confidence * s,     z_confidence = Phi^-1(confidence)

    (the normal-based interval ``estimate +- z se`` of Wasserman, *All of Statistics*, 2004,
    Thm. 6.16, taken one-sided). Each ``mi_stderr`` is the spread of the M pointwise MI terms over
    sqrt(M) (:func:`baselines.collapse.mi.mi_metrics`): the CLT standard error of a sample mean;
    the terms share the mixture marginal, so it is approximate, and its coverage on the
    simulated controls is measured in ``tests/test_collapse_controls.py``. An unknown stderr
    (NaN) counts as 0; a ceiling of 0 (one prompt) gives a fraction of 0.

    Example (hand-worked in ``tests/test_collapse_controls.py``):
        >>> round(mi_fraction_upper_bound([0.05, 0.10, 0.15], [0.06] * 3, [math.log(8)] * 3), 4)
        0.0755
    """
    if not estimates or not len(estimates) == len(stderrs) == len(ceilings):
        raise ValueError("mi_fraction_upper_bound: needs equal, non-empty sequences")
    if not 0.5 <= confidence < 1.0:
        raise ValueError(f"confidence must lie in [0.5, 1); got {confidence!r}")
    fractions = [i / c if c > 0 else 0.0 for i, c in zip(estimates, ceilings, strict=True)]
    errors = [
        se / c if c > 0 and math.isfinite(se) else 0.0
        for se, c in zip(stderrs, ceilings, strict=True)
    ]
    z = statistics.NormalDist().inv_cdf(confidence)
    return _mean(fractions) + z * math.sqrt(sum(e * e for e in errors)) / len(errors)


def _level(window: Sequence[_Evaluation]) -> tuple[float, float]:
    """Mean MI estimate of a window and its standard error (from each evaluation's
    ``mi_stderr``; 0 where unknown)."""
    variance = sum(e.mi_stderr**2 for e in window if math.isfinite(e.mi_stderr))
    return _mean([e.mi_estimate for e in window]), math.sqrt(variance) / len(window)


@dataclass
class DetectorSettings:
    """The thresholds of the collapse detector (:class:`ZScoreTracker`), also the
    ``diagnostics.*`` keys of the trainer's config (:class:`baselines.config.DiagnosticsConfig`).

    Attributes:
        window: >= 1: evaluations averaged (MI fraction, entropy, RAGEN's MI-ZScore), needed
            for a near-chance verdict, and dependent ones in a row that clear the flag.
        significance: in (0, 1): largest permutation p-value that counts as significant. The
            p-value is at least ``1 / (B + 1)`` with B permutations, so B must be at least
            ``1 / significance - 1`` (``diagnostics.permutations``, 199 by default).
        near_fraction: in [0, 1]: a window is near chance when the upper confidence bound of
            its mean MI / ceiling (:func:`mi_fraction_upper_bound`, at ``near_confidence``) is
            below this.
        near_confidence: in [0.5, 1): one-sided confidence of that bound (0.95: z = 1.645).
        dependent_fraction: in [near_fraction, 1]: averaged MI / ceiling that counts as
            materially dependent (the band between the two is the hysteresis).
        entropy_tol: in [0, 1]: largest relative fall of the window's mean entropy below its
            level at the last dependent evaluation that still counts as holding.
        min_pairs: >= 2: fewest scored reasonings for a verdict.
        min_prompts: >= 2: fewest distinct prompts among them for a verdict.
        min_valid_rate: in [0, 1]: ``valid_thinking_rate`` below this is ``format_collapsed``.
        drop_z: >= 0: standard errors (``mi_stderr``, combined over the windows) by which the
            window's mean MI must have fallen below its level at the last dependent evaluation
            for ``collapsed``.
        degenerate_factor: >= 1: a near-chance window each of whose entropies (or per-token
            NLLs of its reasonings under the warm start, ``reference_nll_per_token``, when the
            trainer passes them) exceeds this multiple of the reference entropy is
            ``degenerate`` (input-blind noise), not a template.
        reference_entropy: >= 0: the warm start's per-token entropy of its reasonings (nats);
            0 takes the entropy of the first evaluation that enters the MI history (the warm
            start's, when diagnostics run from the first step).
    """

    window: int = 3
    significance: float = 0.01
    near_fraction: float = 0.1
    dependent_fraction: float = 0.2
    entropy_tol: float = 0.2
    min_pairs: int = 16
    min_prompts: int = 4
    min_valid_rate: float = 0.5
    drop_z: float = 4.0
    near_confidence: float = 0.95
    degenerate_factor: float = 1.5
    reference_entropy: float = 0.0

    def check_settings(self, prefix: str = "") -> None:
        """Raise ``ValueError`` naming the first setting out of its range (``prefix`` + name)."""
        ranges = {
            "window": (1, math.inf),
            "significance": (0.0, 1.0),
            "near_fraction": (0.0, 1.0),
            "dependent_fraction": (self.near_fraction, 1.0),
            "entropy_tol": (0.0, 1.0),
            "min_pairs": (2, math.inf),
            "min_prompts": (2, math.inf),
            "min_valid_rate": (0.0, 1.0),
            "drop_z": (0.0, math.inf),
            "near_confidence": (0.5, 1.0),
            "degenerate_factor": (1.0, math.inf),
            "reference_entropy": (0.0, math.inf),
        }
        for name, (low, high) in ranges.items():
            value = getattr(self, name)
            open_ends = (name == "significance" and not 0.0 < value < 1.0) or (
                name == "near_confidence" and not value < 1.0
            )
            if open_ends or not low <= value <= high:
                bound = f"lie in [{low}, {high}]" if high < math.inf else f"be >= {low}"
                bound = "lie in (0, 1)" if name == "significance" else bound
                bound = "lie in [0.5, 1)" if name == "near_confidence" else bound
                raise ValueError(f"{prefix}{name}: must {bound}, got {value!r}")


@dataclass
class ZScoreTracker(DetectorSettings):
    """Moving averages of the z-scores, and a state for every evaluation with stated error rates.

    Call :meth:`update` once per diagnostic evaluation with the dict of
    :func:`~baselines.collapse.mi.mi_metrics` plus the trainer's sample statistics
    (``valid_thinking_rate``; ``num_reasonings`` and ``num_prompts`` come with
    :func:`~baselines.collapse.mi.mi_metrics`), or with those statistics alone when too few
    prompts kept a reasoning to score. The entropy is the policy's mean token entropy over the
    **whole** batch, or, when not passed, ``conditional_entropy_est_per_token`` of the metrics
    (the diagnostic sample is drawn from the whole batch before filtering; the kept groups'
    entropy moves with what the filter keeps).

    Each evaluation gets one state (:data:`STATES`), the first rule that applies:

    1. ``format_collapsed``: ``valid_thinking_rate < min_valid_rate``: most replies no longer
       hold a closed think block, so the scored reasonings are a minority picked by the format
       and say nothing of the policy's reasoning. Not a template collapse; the evaluation does
       not enter the MI history.
    2. ``insufficient_sample``: no MI metrics, or fewer than ``min_pairs`` scored reasonings or
       ``min_prompts`` distinct prompts. No verdict; it does not enter the MI history.
    3. Every other evaluation enters the MI history. Its **window** is the last ``window`` such
       evaluations (itself included); ``f`` is the mean over the window of MI / ceiling
       (``mi_estimate / mi_upper_bound``, the ceiling being H(prompt mixture), ``log K`` when
       balanced) and the entropy level is the window's mean entropy.

       - ``dependent``: significant (permutation ``mi_pvalue <= significance``) **and** material
         (``f >= dependent_fraction``). Sets "was dependent" and the entropy reference (the
         window's mean entropy at this evaluation).
       A full window is **near chance** when the one-sided upper confidence bound of its mean
       MI / ceiling (:func:`mi_fraction_upper_bound`: ``f + z * s``, ``z = Phi^-1(near_confidence)``,
       s from each evaluation's ``mi_stderr``) is below ``near_fraction``: the data must show the
       MI is small, not merely fail to show it is large (the rule before, "mean < near_fraction
       and no p <= 0.01 in the window", flagged a residual MI of 0.10 nats in 65 of 100
       simulated runs, 17 within one window; now 96 and 70: ``docs/ragen2.md``, issue 44).

       - ``degenerate``: near chance, and every entropy of the window (or every NLL of its
         reasonings under the warm start, ``reference_nll_per_token``, when given) above
         ``degenerate_factor`` times the warm start's entropy (``reference_entropy``, else the
         first evaluation of the MI history): input-blind **noise**, not a template. Clears a
         raised flag.
       - ``never_dependent``: near chance, and no evaluation so far was dependent (a policy
         that never read its input did not collapse).
       - ``collapsed`` (``template_collapse``): near chance, an earlier dependent evaluation,
         a significant fall (the window's mean ``mi_estimate`` at least ``drop_z`` standard
         errors below its mean at the last dependent evaluation, each evaluation's error its
         ``mi_stderr``), and the entropy holding: every entropy of the window finite and their
         mean ``>= (1 - entropy_tol) * reference``. Once raised it stays
         (hysteresis) until ``window`` dependent evaluations in a row clear it; the evaluations
         between report ``collapsed``.
       - ``undecided``: anything else: a bound above ``near_fraction``, material but not significant,
         a window not yet full, a fall within the noise, or near chance with the entropy falling
         from the reference (the policy converging to one output: a third failure, not template
         collapse).

    Why these rules (issue 23; rates measured in ``tests/test_collapse_detector.py`` on MI metrics
    of simulated log-likelihood matrices, 32 pairs of 8 prompts): one evaluation "1.7 SD above
    chance" set "was dependent" for good, and the weak noise of a stationary policy with
    I = 0.04 nats then raised the flag in 15-25 % of runs; requiring a significant **and**
    material (averaged) MI brings that to 0 of 200 runs. At 16 pairs of 4 prompts a stationary
    MI of 8-15 % of the ceiling crosses both fractions by noise (12-38 % of runs without the fall
    test); a fall of ``drop_z`` = 4 standard errors brings that under 1 %. The entropy is judged against its level
    when the policy was last dependent, averaged over a window, with a relative band
    ``entropy_tol`` (0.2: the per-token conditional entropy estimate of 16-64 reasonings moves
    a few percent from batch to batch; a template that settles from its peak drifted more than
    the old 10 % of the window's first evaluation, which missed a known collapse).

    RAGEN's MI-ZScore (``ragen_mi_zscore``, per token, else ``ragen_mi_zscore_seq``) is averaged
    over the same window and logged (``collapse/ragen_mi_zscore_avg``) but not thresholded: it
    has no null distribution, so no threshold on it has a stated error rate.

    :meth:`state_dict` and :meth:`load_state_dict` save and restore it with a checkpoint.

    RAGEN's MI-ZScore EMA (``collapse_metrics.py:315-323,336-342``): the population std of the
    marginal log-likelihood is smoothed, ``ema <- decay * ema + (1 - decay) * std`` (the first
    value initialises it; RAGEN's decay is 0.9), and
    ``ragen_mi_zscore_ema = mi_estimate_per_token / (ema + 1e-3)`` (and ``_seq`` with the summed
    ones), which equals RAGEN's ``mean((matched - marginal) / (ema + 1e-3))``.

    Attributes:
        ema_decay: in [0, 1): decay of every moving average here; the z-score's is
            ``ema <- ema_decay * ema + (1 - ema_decay) * z``, the first z initialising it.
        window, significance, near_fraction, dependent_fraction, entropy_tol, min_pairs,
            min_prompts, min_valid_rate, drop_z, near_confidence, degenerate_factor,
            reference_entropy: the thresholds (:class:`DetectorSettings`).
    """

    ema_decay: float = 0.9
    zscore_ema: float | None = field(default=None, init=False)
    history: list[_Evaluation] = field(default_factory=list, init=False, repr=False)
    _latched: bool = field(default=False, init=False, repr=False)
    _clear_run: int = field(default=0, init=False, repr=False)
    _ever_dependent: bool = field(default=False, init=False, repr=False)
    _reference: float = field(default=math.nan, init=False, repr=False)
    _mi_reference: tuple[float, float] = field(default=(math.nan, 0.0), init=False, repr=False)
    _warm_entropy: float = field(default=math.nan, init=False, repr=False)
    _std_ema: dict[str, float] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.ema_decay < 1.0:
            raise ValueError(f"ema_decay must be in [0, 1); got {self.ema_decay}")
        self.check_settings()

    @classmethod
    def from_config(cls, config: object) -> ZScoreTracker:
        """A tracker with the settings of a :class:`baselines.config.DiagnosticsConfig`."""
        names = [f.name for f in dataclasses.fields(DetectorSettings)]
        return cls(ema_decay=config.ema, **{name: getattr(config, name) for name in names})

    # ------------------------------------------------------------------ the states

    @property
    def state(self) -> str:
        """The state of the last evaluation (``""`` before the first)."""
        return self.history[-1].state if self.history else ""

    @property
    def template_collapse(self) -> bool:
        """The last evaluation's state is ``collapsed``."""
        return self.state == "collapsed"

    @property
    def never_dependent(self) -> bool:
        """The last evaluation's state is ``never_dependent``."""
        return self.state == "never_dependent"

    def _window(self) -> list[_Evaluation]:
        """The last ``window`` evaluations of the MI history (the last one included)."""
        scored = [e for e in self.history if e.state not in _NO_MI_STATES]
        return scored[-self.window :]

    def _classify(self, e: _Evaluation) -> str:
        """The state of ``e``, the last of :attr:`history`; moves the flag's running state."""
        if math.isfinite(e.valid_thinking_rate) and e.valid_thinking_rate < self.min_valid_rate:
            return "format_collapsed"
        if (
            not math.isfinite(e.mi_estimate)
            or e.num_reasonings < self.min_pairs
            or e.num_prompts < self.min_prompts
        ):
            return "insufficient_sample"
        e.state = "scored"  # enters the window
        if not math.isfinite(self._warm_entropy):
            self._warm_entropy = self.reference_entropy or e.entropy
        recent = self._window()
        fraction = _mean([r.fraction for r in recent])
        entropies = [r.entropy for r in recent]
        level = _level(recent)
        dependent = e.mi_pvalue <= self.significance and fraction >= self.dependent_fraction
        if dependent:
            self._ever_dependent = True
            self._reference = _mean([h for h in entropies if math.isfinite(h)])
            self._mi_reference = level
        near = len(recent) >= self.window and (
            mi_fraction_upper_bound(
                [r.mi_estimate for r in recent],
                [r.mi_stderr for r in recent],
                [r.mi_upper_bound for r in recent],
                self.near_confidence,
            )
            < self.near_fraction
        )
        if near and self._degenerate(recent):
            self._latched, self._clear_run = False, 0  # noise replaces a template
            return "degenerate"
        if self._latched:
            self._clear_run = self._clear_run + 1 if dependent else 0
            if self._clear_run < self.window:
                return "collapsed"
            self._latched, self._clear_run = False, 0
        if dependent:
            return "dependent"
        if not near:
            return "undecided"
        if not self._ever_dependent:
            return "never_dependent"
        (mi_ref, se_ref), (mi_now, se_now) = self._mi_reference, level
        if not mi_ref - mi_now >= self.drop_z * math.hypot(se_ref, se_now):
            return "undecided"  # no significant fall from the dependent level
        holding = (
            all(math.isfinite(h) for h in entropies)
            and _mean(entropies) >= (1.0 - self.entropy_tol) * self._reference
        )
        if holding:
            self._latched, self._clear_run = True, 0
            return "collapsed"
        return "undecided"

    def _degenerate(self, recent: Sequence[_Evaluation]) -> bool:
        """Every evaluation of the window is far less likely than the warm start's reasonings:
        its entropy (or, when given, every NLL under the warm start) above
        ``degenerate_factor`` times the reference entropy.

        Every, not the mean: on a real run (the tiny policy moved from oracle to input-blind
        reasonings, 0.16 nats a token) one evaluation in the switch read 0.42-0.49, a sample
        with one unlikely token; a mean over the window called that template degenerate."""
        if not (math.isfinite(self._warm_entropy) and self._warm_entropy > 0):
            return False
        bound = self.degenerate_factor * self._warm_entropy
        nlls = [r.reference_nll for r in recent if math.isfinite(r.reference_nll)]
        return all(math.isfinite(r.entropy) and r.entropy > bound for r in recent) or (
            len(nlls) == len(recent) and all(v > bound for v in nlls)
        )

    def _replay(self) -> None:
        """Recompute every state from :attr:`history` (the states are a function of it)."""
        history, self.history = self.history, []
        self._latched, self._clear_run, self._ever_dependent = False, 0, False
        self._reference, self._mi_reference = math.nan, (math.nan, 0.0)
        self._warm_entropy = math.nan
        for e in history:
            self.history.append(e)
            e.state = self._classify(e)

    def state_dict(self) -> dict[str, object]:
        """The running state (averages, history with states) as plain Python data."""
        return {
            "version": 2,
            "zscore_ema": self.zscore_ema,
            "history": [dataclasses.asdict(e) for e in self.history],
            "std_ema": dict(self._std_ema),
        }

    def load_state_dict(self, state: Mapping[str, object]) -> None:
        """Restore what :meth:`state_dict` returned (settings stay those of this tracker).

        The states are recomputed from the history. A state saved before the states existed (no
        ``version``) lacks the p-values, so its evaluations cannot be dependent again: its saved
        ``flag`` and ``ever_dependent`` are kept instead.
        """
        self.zscore_ema = state["zscore_ema"]
        self._std_ema = dict(state.get("std_ema", {}))
        self.history = [_Evaluation(**e) for e in state["history"]]
        self._replay()
        if "version" not in state:
            self._ever_dependent = self._ever_dependent or bool(state.get("ever_dependent"))
            if state.get("flag"):
                self._latched, self._clear_run = True, 0
                if self.history:
                    self.history[-1].state = "collapsed"

    def _ema(self, key: str, value: float) -> float:
        old = self._std_ema.get(key)
        if old is None or not math.isfinite(old):
            self._std_ema[key] = value
        else:
            self._std_ema[key] = self.ema_decay * old + (1.0 - self.ema_decay) * value
        return self._std_ema[key]

    def update(
        self, metrics: Mapping[str, float], entropy: float | None = None
    ) -> dict[str, float]:
        """Record one evaluation.

        Args:
            metrics: output of :func:`~baselines.collapse.mi.mi_metrics` (needs ``mi_zscore``,
                ``mi_estimate``, ``mi_upper_bound``, ``mi_pvalue``, ``num_reasonings``,
                ``num_prompts``; and ``conditional_entropy_est_per_token`` when ``entropy`` is
                None), with the trainer's ``valid_thinking_rate`` when known; or, for an
                evaluation with nothing to score, only the sample statistics (``num_reasonings``,
                ``num_prompts``, ``valid_thinking_rate``). The RAGEN moving averages are added when
                ``ragen_marginal_std`` (and ``_seq``) are present. Optional
                ``reference_nll_per_token``: the mean per-token NLL of the scored reasonings
                under the warm start, read by the ``degenerate`` state.
            entropy: mean policy token entropy (nats) over the whole batch at this evaluation;
                None reads the per-token conditional entropy estimate from ``metrics``.

        Returns:
            ``collapse/state_<s>`` for each state of :data:`STATES` (1.0 for this evaluation's,
            else 0.0), ``collapse/template_collapse`` and ``collapse/never_dependent`` (the same
            as ``state_collapsed`` and ``state_never_dependent``); with MI metrics also
            ``collapse/mi_zscore``, ``collapse/mi_zscore_ema``, ``collapse/entropy``,
            ``collapse/mi_fraction`` (``mi_estimate / mi_upper_bound``); when the evaluation
            enters the MI history ``collapse/mi_fraction_avg``, ``collapse/entropy_avg``,
            ``collapse/ragen_mi_zscore_avg`` (window means) and ``collapse/entropy_reference``
            (once an evaluation was dependent); and when available
            ``collapse/ragen_marginal_std_ema``, ``collapse/ragen_mi_zscore_ema`` and their
            ``_seq`` forms.

        Raises:
            KeyError: a required metric is missing (the message names it).
        """
        has_mi = "mi_estimate" in metrics
        if has_mi:
            required = ("mi_zscore", "mi_upper_bound", "mi_pvalue", "num_reasonings")
            missing = [k for k in required + ("num_prompts",) if k not in metrics]
            if entropy is None and "conditional_entropy_est_per_token" not in metrics:
                missing.append("conditional_entropy_est_per_token (or pass entropy=...)")
        else:
            stats = ("num_reasonings", "num_prompts", "valid_thinking_rate")
            missing = [] if any(k in metrics for k in stats) else ["mi_estimate", *stats]
        if missing:
            raise KeyError(f"ZScoreTracker.update: metrics lack {missing}")
        if entropy is None:
            entropy = float(metrics.get("conditional_entropy_est_per_token", math.nan))
        ragen = metrics.get("ragen_mi_zscore", metrics.get("ragen_mi_zscore_seq", math.nan))
        evaluation = _Evaluation(
            entropy=float(entropy),
            retrieval_above_chance=float(
                metrics.get("retrieval_accuracy", math.nan)
                - metrics.get("retrieval_chance", math.nan)
            ),
            mi_estimate=float(metrics.get("mi_estimate", math.nan)),
            mi_upper_bound=float(metrics.get("mi_upper_bound", math.nan)),
            mi_pvalue=float(metrics.get("mi_pvalue", math.nan)),
            mi_stderr=float(metrics.get("mi_stderr", math.nan)),
            ragen_mi_zscore=float(ragen),
            num_reasonings=float(metrics.get("num_reasonings", 0.0)),
            num_prompts=float(metrics.get("num_prompts", 0.0)),
            valid_thinking_rate=float(metrics.get("valid_thinking_rate", math.nan)),
            reference_nll=float(metrics.get("reference_nll_per_token", math.nan)),
        )
        self.history.append(evaluation)
        evaluation.state = self._classify(evaluation)
        out = {f"collapse/state_{s}": float(s == evaluation.state) for s in STATES}
        out["collapse/template_collapse"] = float(self.template_collapse)
        out["collapse/never_dependent"] = float(self.never_dependent)
        if not has_mi:
            return out
        z = float(metrics["mi_zscore"])
        if self.zscore_ema is None or not math.isfinite(self.zscore_ema):
            self.zscore_ema = z
        else:
            self.zscore_ema = self.ema_decay * self.zscore_ema + (1.0 - self.ema_decay) * z
        out.update(
            {
                "collapse/mi_zscore": z,
                "collapse/mi_zscore_ema": self.zscore_ema,
                "collapse/entropy": float(entropy),
                "collapse/mi_fraction": evaluation.fraction,
            }
        )
        if evaluation.state not in _NO_MI_STATES:
            recent = self._window()
            out["collapse/mi_fraction_avg"] = _mean([r.fraction for r in recent])
            out["collapse/entropy_avg"] = _mean([r.entropy for r in recent])
            out["collapse/ragen_mi_zscore_avg"] = _mean([r.ragen_mi_zscore for r in recent])
            if math.isfinite(self._reference):
                out["collapse/entropy_reference"] = self._reference
        for suffix, mi_key in (("", "mi_estimate_per_token"), ("_seq", "mi_estimate")):
            std = metrics.get(f"ragen_marginal_std{suffix}")
            if std is None or mi_key not in metrics:
                continue
            ema = self._ema(suffix or "token", float(std))
            out[f"collapse/ragen_marginal_std_ema{suffix}"] = ema
            out[f"collapse/ragen_mi_zscore_ema{suffix}"] = float(metrics[mi_key]) / (
                ema + RAGEN_STD_EPS
            )
        return out
