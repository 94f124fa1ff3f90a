"""GRPO's expected gradient on Bandit's risky arm under shared and per-episode payout draws.

The policy is a one-step softmax over the two arms with logits ``(theta_safe, theta_risky)``;
``p = pi(risky)``. A group is ``N`` episodes of one reset seed. Each member picks an arm, the
safe arm pays ``low`` (0.15 ours, 0.1 RAGEN's), the risky arm 1 with probability 0.25 else 0.
The group's gradient on the risky arm's logit is

    g = sum_i A_i * d log pi(a_i) / d theta_risky = sum_i A_i * (1[a_i = risky] - p)

(the per-episode mean that token-mean aggregation gives a one-token reply is ``g / N``), with
the trainer's own advantages (``baselines.rl.advantages.grpo_advantages``): GRPO
``A_i = (r_i - mean) / (std + 1e-6)`` (unbiased std, equal-reward groups exactly 0), Dr.GRPO
``A_i = r_i - mean``. Draws:

* shared: one payout draw per group (``payout_draws="seeded"``: every member pulling the risky
  arm gets the same payout, as in our training loop until issue 44);
* per-episode: each member its own draw (``payout_draws="per_episode"``, RAGEN's).

``E[g]`` is computed exactly, by enumerating (number of risky picks k, number of paying draws j)
with their binomial weights, and checked by Monte Carlo through the environment itself
(``agentgym.envs.bandit.BanditEnv``: ``--groups`` groups of fresh seeds, members pulling the
risky arm with probability ``p``), mean +- standard error. The true policy gradient of the
expected reward is ``p (1 - p) (E[risky] - E[safe])`` per episode; Dr.GRPO's ``E[g]`` is exactly
``(N - 1)`` times it, under either draw.

    python scripts/bandit_grpo_bias.py                  # N = 8, p = 0.5, both payouts, ~1 min
    python scripts/bandit_grpo_bias.py --groups 0       # exact values only (seconds)
"""

from __future__ import annotations

import argparse
import itertools
from math import comb

import baselines  # noqa: F401  (before torch: sets OMP_WAIT_POLICY, agentgym.threads)

# isort: split
import numpy as np
import torch

from agentgym.envs.bandit import BanditEnv
from baselines.rl.advantages import grpo_advantages

PAY_PROB = 0.25  # the risky arm's chance to pay 1 (ours and RAGEN's)


def _group_gradient(
    rewards: torch.Tensor, risky: torch.Tensor, p: float, std: bool
) -> torch.Tensor:
    """``g`` for each row of ``rewards`` / ``risky`` (``[C, N]``): sum_i A_i (1[risky_i] - p)."""
    adv = grpo_advantages(rewards.to(torch.float64), normalize_std=std)
    score = risky.to(torch.float64) - p
    return (adv * score).sum(dim=1)


def exact(n: int, p: float, low: float, shared: bool, std: bool) -> float:
    """``E[g]`` by enumeration of (k risky picks, j paying draws); members are exchangeable, so
    the risky pickers come first and the paying ones first among them."""
    rows, risky, weights = [], [], []
    for k in range(n + 1):
        pk = comb(n, k) * p**k * (1 - p) ** (n - k)
        if shared:
            outcomes = [(PAY_PROB, k), (1 - PAY_PROB, 0)] if k else [(1.0, 0)]
        else:
            outcomes = [
                (comb(k, j) * PAY_PROB**j * (1 - PAY_PROB) ** (k - j), j) for j in range(k + 1)
            ]
        for w, j in outcomes:
            rows.append([1.0] * j + [0.0] * (k - j) + [low] * (n - k))
            risky.append([1] * k + [0] * (n - k))
            weights.append(pk * w)
    g = _group_gradient(torch.tensor(rows), torch.tensor(risky), p, std)
    return float((torch.tensor(weights, dtype=torch.float64) * g).sum())


def monte_carlo(
    n: int, p: float, low: float, draws: str, std: bool, groups: int, seed: int
) -> tuple[float, float]:
    """Mean and standard error of ``g`` over ``groups`` groups played on the environment."""
    BanditEnv.clear_payout_draw_counts()
    envs = [
        BanditEnv(action_format="raw", low_arm_reward=low, payout_draws=draws) for _ in range(n)
    ]
    choose = np.random.default_rng([seed, n, int(p * 1e6)])  # the policy's own generator
    rewards = np.empty((groups, n))
    risky = choose.random((groups, n)) < p
    for g, i in itertools.product(range(groups), range(n)):
        env = envs[i]
        env.reset(seed=seed * 10**7 + g)  # one seed per group, fresh in this process
        arm = env.risky_arm if risky[g, i] else env.safe_arm
        rewards[g, i] = env.step(arm)[1]
    grads = _group_gradient(torch.tensor(rewards), torch.tensor(risky), p, std).numpy()
    return float(grads.mean()), float(grads.std(ddof=1) / np.sqrt(groups))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--group-size", type=int, nargs="+", default=[8])
    parser.add_argument("--p", type=float, nargs="+", default=[0.5], help="pi(risky)")
    parser.add_argument("--low", type=float, nargs="+", default=[0.15, 0.1], help="safe payout")
    parser.add_argument("--groups", type=int, default=20_000, help="Monte Carlo groups (0: off)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    cases = [("GRPO, shared draws", True, True), ("GRPO, per-episode draws", False, True)]
    cases += [("Dr.GRPO, shared draws", True, False), ("Dr.GRPO, per-episode draws", False, False)]
    print("E[g], g = sum_i A_i dlog pi(a_i)/dtheta_risky per group; risky pays 1 w.p. 0.25")
    print(f"{'N':>3} {'p':>5} {'safe':>5}  {'estimator, draws':<27} {'exact':>8}  Monte Carlo")
    for n, p, low in itertools.product(args.group_size, args.p, args.low):
        truth = (n - 1) * p * (1 - p) * (PAY_PROB - low)
        for name, shared, std in cases:
            value = exact(n, p, low, shared, std)
            line = f"{n:>3} {p:>5.2f} {low:>5.2f}  {name:<27} {value:>+8.3f}"
            if args.groups:
                draws = "seeded" if shared else "per_episode"
                mean, se = monte_carlo(n, p, low, draws, std, args.groups, args.seed)
                line += f"  {mean:+.3f} +- {se:.3f} ({args.groups} groups)"
            print(line, flush=True)
        print(f"{'':>17}(N-1) p (1-p) (E[risky]-E[safe]) = {truth:+.3f}")


if __name__ == "__main__":
    main()
