"""Tests of baselines.rl.minibatches (RAGEN's several PPO mini-batch steps per rollout batch)."""

import pytest
import torch

from baselines.rl.minibatches import minibatch_indices, pack_by_tokens, split_packs


def test_ragen_default_four_steps():
    # RAGEN: 8 groups x 16 = 128 sequences, ppo_mini_batch_size 32 -> 4 optimizer steps.
    batches = minibatch_indices(128, 32)
    assert len(batches) == 4 and [len(b) for b in batches] == [32] * 4
    assert batches[1][0] == 32


def test_filtering_cuts_the_number_of_steps():
    # Filtering keeps 5 of 8 groups of 16 = 80 sequences: ceil(80 / 32) = 3 steps (RAGEN copies
    # 16 samples to reach 96 and also takes 3).
    assert [len(b) for b in minibatch_indices(80, 32)] == [32, 32, 16]


def test_zero_means_whole_batch_and_empty_batch():
    assert minibatch_indices(7, 0) == [list(range(7))]
    assert minibatch_indices(0, 4) == []


def test_shuffled_is_a_seeded_permutation():
    a = minibatch_indices(10, 4, generator=torch.Generator().manual_seed(3))
    b = minibatch_indices(10, 4, generator=torch.Generator().manual_seed(3))
    assert a == b and sorted(i for m in a for i in m) == list(range(10))
    assert [len(m) for m in a] == [4, 4, 2]


def test_negative_is_refused():
    with pytest.raises(ValueError, match=">= 0"):
        minibatch_indices(-1, 2)


def test_pack_by_tokens_hand_packing():
    # Longest first: 300, 290, 50, 40, 10. With 600 tokens: [300, 290] = 2 x 300 = 600 fits;
    # a third row would make 900. Then [50, 40, 10] = 3 x 50 = 150.
    assert pack_by_tokens([10, 300, 40, 290, 50], max_tokens=600) == [[1, 3], [4, 2, 0]]
    # A row over the budget goes alone; the row cap splits the short ones.
    assert pack_by_tokens([700, 5, 5, 5], max_tokens=600, max_rows=2) == [[0], [1, 2], [3]]
    assert pack_by_tokens([], max_tokens=10) == []
    # SFT's step of 4 examples at 10 tokens: [9] alone (2 x 9 > 10), [5, 4] = 10, then [3].
    assert pack_by_tokens([3, 9, 4, 5], max_tokens=10) == [[1], [3, 2], [0]]
    assert pack_by_tokens([4, 4, 4], max_tokens=8) == [[0, 1], [2]]  # ties keep their order


def test_pack_by_tokens_covers_every_row_within_budget():
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(1, 400, (97,), generator=g).tolist()
    packs = pack_by_tokens(lengths, max_tokens=1000, max_rows=8)
    assert sorted(i for p in packs for i in p) == list(range(97))
    for p in packs:
        assert len(p) <= 8
        assert len(p) == 1 or len(p) * max(lengths[i] for i in p) <= 1000


def test_pack_by_tokens_rejects_bad_budget():
    with pytest.raises(ValueError, match="max_tokens"):
        pack_by_tokens([3], max_tokens=0)


def test_split_packs_cuts_the_widest_pack_then_pads_with_dummies() -> None:
    """Worked by hand: the first pack with the most rows is cut into its first ceil(n/2) rows
    and the rest until the count is reached; single rows left: None padding."""
    assert split_packs([[5, 2, 7, 1], [3]], 2) == [[5, 2, 7, 1], [3]]
    assert split_packs([[5, 2, 7, 1], [3]], 3) == [[5, 2], [7, 1], [3]]
    assert split_packs([[5, 2, 7, 1], [3]], 4) == [[5], [2], [7, 1], [3]]
    assert split_packs([[5, 2, 7], [3, 4]], 3) == [[5, 2], [7], [3, 4]]
    assert split_packs([[5, 2, 7, 1], [3]], 6) == [[5], [2], [7], [1], [3], None]
    assert split_packs([], 2) == [None, None]
    for packs in ([[0, 1, 2], [3]], [[4], [0, 1], [2, 3]]):
        for count in range(len(packs), 8):
            out = split_packs(packs, count)
            assert len(out) == count
            assert [i for p in out if p for i in p] == [i for p in packs for i in p]


def test_split_packs_refuses_fewer_than_given() -> None:
    with pytest.raises(ValueError, match="below the 2 packs"):
        split_packs([[0], [1]], 1)
