"""Tests of baselines.rl.advantages against values worked out by hand (in the comments)."""

import math

import pytest
import torch

from baselines.rl.advantages import gae, grpo_advantages, whiten

# Hand table: three groups of N = 4 episode rewards.
REWARDS = torch.tensor(
    [
        [1.0, 0.0, 0.0, 1.0],  # mean 0.5, deviations +-0.5, unbiased var 4*0.25/3 = 1/3
        [2.0, 2.0, 2.0, 2.0],  # zero spread: advantage 0 for everyone
        [
            0.0,
            3.0,
            0.0,
            0.0,
        ],  # mean 0.75, deviations (-0.75, 2.25, -0.75, -0.75), var 6.75/3 = 2.25
    ]
)


def test_grpo_hand_table():
    adv = grpo_advantages(REWARDS, eps=1e-12)
    # group 0: +-0.5 / sqrt(1/3) = +-0.8660254; group 2: deviations / 1.5
    s = 0.5 / math.sqrt(1.0 / 3.0)
    expected = torch.tensor(
        [[s, -s, -s, s], [0.0, 0.0, 0.0, 0.0], [-0.5, 1.5, -0.5, -0.5]],
    )
    torch.testing.assert_close(adv, expected, atol=1e-6, rtol=0)


def test_grpo_default_eps_zero_spread_gives_zero_not_nan():
    adv = grpo_advantages(REWARDS)
    assert torch.isfinite(adv).all()
    assert torch.equal(adv[1], torch.zeros(4))
    # eps = 1e-6 is added to the std: group 2 is -0.75 / (1.5 + 1e-6)
    assert adv[2, 0].item() == pytest.approx(-0.75 / (1.5 + 1e-6), abs=1e-7)


def test_dr_grpo_hand_table():
    adv = grpo_advantages(REWARDS, normalize_std=False)
    expected = torch.tensor(
        [[0.5, -0.5, -0.5, 0.5], [0.0, 0.0, 0.0, 0.0], [-0.75, 2.25, -0.75, -0.75]],
    )
    torch.testing.assert_close(adv, expected)


def test_grpo_rejects_bad_shapes():
    with pytest.raises(ValueError, match=r"\[G, N\]"):
        grpo_advantages(torch.zeros(4))
    with pytest.raises(ValueError, match="N must be >= 2"):
        grpo_advantages(torch.zeros(3, 1))


def test_gae_hand_example_multi_turn():
    # Positions: prompt | policy | policy (end of turn 1) | observation | policy (end of episode)
    mask = torch.tensor([[0, 1, 1, 0, 1]])
    rewards = torch.tensor([[0.0, 0.0, 0.5, 0.0, 1.0]])
    values = torch.tensor([[9.0, 0.4, 0.6, 7.0, 0.8]])  # 9 and 7 sit on masked positions: ignored
    gamma, lam = 0.9, 0.8
    # Valid steps, in order: (r, V) = (0, 0.4), (0.5, 0.6), (1.0, 0.8); terminal after the last.
    # delta_3 = 1.0 + 0.9*0   - 0.8 = 0.2          A_3 = 0.2
    # delta_2 = 0.5 + 0.9*0.8 - 0.6 = 0.62         A_2 = 0.62 + 0.72*0.2   = 0.764
    # delta_1 = 0.0 + 0.9*0.6 - 0.4 = 0.14         A_1 = 0.14 + 0.72*0.764 = 0.69008
    # returns R = A + V: 1.09008, 1.364, 1.0; masked positions 0.
    adv, ret = gae(rewards, values, mask, gamma=gamma, lam=lam)
    torch.testing.assert_close(adv, torch.tensor([[0.0, 0.69008, 0.764, 0.0, 0.2]]))
    torch.testing.assert_close(ret, torch.tensor([[0.0, 1.09008, 1.364, 0.0, 1.0]]))


def test_gae_padding_and_bootstrap():
    # Row 0: 3 policy tokens then right padding; gamma = lam = 1 gives Monte Carlo: A_t = G_t - V_t.
    # Row 1: same tokens, cut by a time limit, bootstrapped with last_values = 2.
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 0]])
    rewards = torch.tensor([[0.0, 1.0, 2.0, 0.0], [0.0, 1.0, 2.0, 0.0]])
    values = torch.tensor([[1.0, 1.0, 1.0, 5.0], [1.0, 1.0, 1.0, 5.0]])
    adv, ret = gae(rewards, values, mask, 1.0, 1.0, last_values=torch.tensor([0.0, 2.0]))
    # Row 0 returns-to-go: 3, 3, 2 -> A = 2, 2, 1.  Row 1 adds the bootstrap 2: A = 4, 4, 3.
    torch.testing.assert_close(adv, torch.tensor([[2.0, 2.0, 1.0, 0.0], [4.0, 4.0, 3.0, 0.0]]))
    torch.testing.assert_close(ret, torch.tensor([[3.0, 3.0, 2.0, 0.0], [5.0, 5.0, 4.0, 0.0]]))


def test_gae_lambda_zero_is_td_error():
    mask = torch.ones(1, 3)
    rewards = torch.tensor([[0.0, 0.0, 1.0]])
    values = torch.tensor([[0.5, 0.25, 0.75]])
    adv, _ = gae(rewards, values, mask, gamma=0.5, lam=0.0)
    # delta_t = r_t + 0.5 V_{t+1} - V_t: 0.125 - 0.5, 0.375 - 0.25, 1 - 0.75
    torch.testing.assert_close(adv, torch.tensor([[-0.375, 0.125, 0.25]]))


def test_gae_rejects_reward_on_masked_position_and_bad_args():
    with pytest.raises(ValueError, match="masked position"):
        gae(torch.tensor([[1.0, 0.0]]), torch.zeros(1, 2), torch.tensor([[0, 1]]))
    with pytest.raises(ValueError, match="gamma"):
        gae(torch.zeros(1, 2), torch.zeros(1, 2), torch.ones(1, 2), gamma=1.5)
    with pytest.raises(ValueError, match="share one shape"):
        gae(torch.zeros(1, 2), torch.zeros(1, 3), torch.ones(1, 2))


def test_whiten_masked():
    x = torch.tensor([1.0, 2.0, 3.0, 100.0])
    mask = torch.tensor([1, 1, 1, 0])
    # mean 2, unbiased var (1 + 0 + 1) / 2 = 1
    torch.testing.assert_close(whiten(x, mask), torch.tensor([-1.0, 0.0, 1.0, 0.0]))
    torch.testing.assert_close(
        whiten(x, mask, shift_mean=False), torch.tensor([1.0, 2.0, 3.0, 0.0])
    )
    with pytest.raises(ValueError, match="at least 2"):
        whiten(x, torch.tensor([1, 0, 0, 0]))


# Issue 13, fault 1: a group of equal rewards must give advantage exactly 0. Naively in float32,
# eight rewards of 0.3 give r - mean = 2.98e-8 and (r - mean) / (0 + 1e-6) = +0.0298 for all eight.
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("normalize_std", [True, False])
@pytest.mark.parametrize("value", [0.3, 0.1, 1.0 / 3.0, -7.7, 0.0, 1e6])
def test_equal_reward_group_gives_exact_zero(dtype, normalize_std, value):
    rewards = torch.tensor([[value] * 8, [1.0, 0.0] * 4], dtype=dtype)
    adv = grpo_advantages(rewards, normalize_std=normalize_std)
    assert adv.dtype == dtype
    assert torch.equal(adv[0], torch.zeros(8, dtype=dtype))  # exactly 0, not 3e-8 or 0.03
    assert (adv[1, 0::2] > 0).all() and (adv[1, 1::2] < 0).all()


def test_equal_reward_group_float32_regression_value():
    # The value the old code produced (hand: float32(0.3) * 8 / 8 rounds one ulp away).
    r = torch.full((1, 8), 0.3)
    naive = (r - r.mean(dim=1, keepdim=True)) / (r.std(dim=1, keepdim=True) + 1e-6)
    assert naive[0, 0].item() == pytest.approx(0.0298, abs=1e-3)  # the fault, reproduced
    assert torch.equal(grpo_advantages(r), torch.zeros(1, 8))  # the fix


def test_grpo_rejects_integer_rewards():
    with pytest.raises(ValueError, match="float"):
        grpo_advantages(torch.tensor([[1, 0]]))
