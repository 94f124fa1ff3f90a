"""Unit tests of agentgym.spaces.UnicodeText: membership, sampling, seeding, shared memory."""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AsyncVectorEnv
from gymnasium.vector.utils import (
    create_shared_memory,
    read_from_shared_memory,
    write_to_shared_memory,
)

from agentgym.spaces import SharedTextBatch, UnicodeText

# ----------------------------------------------------------------------------- contains


def test_contains_any_alphabet_counted_in_code_points() -> None:
    space = UnicodeText(max_length=16)
    assert space.contains("héllo ✓ 世界")  # 10 code points
    assert space.contains("")
    assert space.contains("😀" * 16)  # 16 code points, 64 bytes of UTF-8
    assert not space.contains("😀" * 17)
    assert "abc" in space


@pytest.mark.parametrize("value", [None, 3, b"abc", ["a"], np.array(["a"])])
def test_contains_rejects_non_str(value: Any) -> None:
    assert not UnicodeText(max_length=16).contains(value)


def test_min_length() -> None:
    space = UnicodeText(max_length=4, min_length=2)
    assert [space.contains(s) for s in ("", "a", "ab", "abcd", "abcde")] == [
        False,
        False,
        True,
        True,
        False,
    ]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_length": 0}, "max_length must be an int >= 1, got 0"),
        ({"max_length": 2.5}, "max_length must be an int >= 1, got 2.5"),
        ({"max_length": 4, "min_length": 5}, r"min_length must be an int in \[0, max_length=4\]"),
        ({"max_length": 4, "min_length": -1}, r"min_length must be an int in \[0, max_length=4\]"),
    ],
)
def test_bad_lengths_raise(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        UnicodeText(**kwargs)


def test_equality_and_repr() -> None:
    assert UnicodeText(8) == UnicodeText(8, seed=3)
    assert UnicodeText(8) != UnicodeText(9)
    assert UnicodeText(8, min_length=1) != UnicodeText(8)
    assert repr(UnicodeText(8, min_length=1)) == "UnicodeText(min_length=1, max_length=8)"
    assert not UnicodeText(8).is_np_flattenable


def test_jsonable_round_trip() -> None:
    space = UnicodeText(8)
    assert space.from_jsonable(space.to_jsonable(("a", "é"))) == ["a", "é"]


# ----------------------------------------------------------------------------- sample and seeding


def test_sample_is_a_member_without_surrogates() -> None:
    space = UnicodeText(max_length=40, min_length=3, seed=7)
    for _ in range(200):
        text = space.sample()
        assert space.contains(text)
        assert 3 <= len(text) <= 40
        assert not any(0xD800 <= ord(c) <= 0xDFFF for c in text)
        text.encode("utf-8")  # a surrogate would raise here


def test_sample_length_is_capped_by_sample_max_length() -> None:
    space = UnicodeText(max_length=8192, seed=0)
    assert space.sample_max_length == 256
    assert max(len(space.sample()) for _ in range(100)) <= 256
    assert UnicodeText(max_length=5, sample_max_length=256).sample_max_length == 5


def test_sample_mixes_ascii_and_other_code_points() -> None:
    text = "".join(UnicodeText(max_length=256, min_length=256, seed=1).sample() for _ in range(4))
    ascii_share = sum(0x20 <= ord(c) < 0x7F for c in text) / len(text)
    # Half the characters are drawn from printable ASCII; 1024 draws land well inside 0.4-0.6.
    assert 0.4 < ascii_share < 0.6


def test_seeding_reproduces_samples() -> None:
    a, b = UnicodeText(32, seed=123), UnicodeText(32, seed=123)
    assert [a.sample() for _ in range(5)] == [b.sample() for _ in range(5)]
    c = UnicodeText(32)
    c.seed(123)
    d = UnicodeText(32, seed=123)
    assert [c.sample() for _ in range(5)] == [d.sample() for _ in range(5)]
    assert UnicodeText(32, seed=1).sample() != UnicodeText(32, seed=2).sample()


def test_sample_rejects_mask() -> None:
    with pytest.raises(ValueError, match="takes no mask or probability"):
        UnicodeText(8).sample(mask=np.ones(8))


# ----------------------------------------------------------------------------- shared memory


def test_shared_memory_layout_by_hand() -> None:
    """Row i holds [length, code points..., padding]: 'hé' is [2, 104, 233, 0, 0]."""
    space = UnicodeText(max_length=4)
    shm = create_shared_memory(space, n=2)
    write_to_shared_memory(space, 1, "hé", shm)
    raw = np.frombuffer(shm.get_obj(), dtype=np.int32).reshape(2, 5)
    assert raw.tolist() == [[0, 0, 0, 0, 0], [2, 104, 233, 0, 0]]


def test_shared_memory_view_is_live() -> None:
    space = UnicodeText(max_length=6)
    shm = create_shared_memory(space, n=3)
    view = read_from_shared_memory(space, shm, n=3)
    assert isinstance(view, SharedTextBatch)
    assert tuple(view) == ("", "", "")
    write_to_shared_memory(space, 0, "世界😀", shm)
    write_to_shared_memory(space, 2, "abcdef", shm)
    assert tuple(view) == ("世界😀", "", "abcdef")  # writes show through the same view
    write_to_shared_memory(space, 2, "xy", shm)  # a shorter string over a longer one
    assert view[2] == "xy"
    assert view[-1] == "xy"
    assert view[0:2] == ("世界😀", "")
    assert len(view) == 3
    assert view == ("世界😀", "", "xy") and view == ["世界😀", "", "xy"]
    snapshot = copy.deepcopy(view)
    assert snapshot == ("世界😀", "", "xy") and type(snapshot) is tuple
    write_to_shared_memory(space, 0, "new", shm)
    assert snapshot[0] == "世界😀" and view[0] == "new"  # the deep copy does not follow


def test_shared_memory_rejects_too_long() -> None:
    space = UnicodeText(max_length=3)
    shm = create_shared_memory(space, n=1)
    with pytest.raises(ValueError, match="raise the environment's observation max_length"):
        write_to_shared_memory(space, 0, "abcd", shm)


class _EchoEnv(gym.Env[str, str]):
    """Observation = the last action text (to move arbitrary Unicode through AsyncVectorEnv)."""

    def __init__(self) -> None:
        self.observation_space = UnicodeText(max_length=32)
        self.action_space = UnicodeText(max_length=32)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        return f"start {seed}", {}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        return action, 0.0, False, False, {}


@pytest.mark.parametrize("copy_obs", [True, False])
def test_async_vector_env_carries_unicode(copy_obs: bool) -> None:
    vec = AsyncVectorEnv([_EchoEnv, _EchoEnv], copy=copy_obs)
    try:
        observations, _ = vec.reset(seed=[5, 6])
        assert tuple(observations) == ("start 5", "start 6")
        observations, *_ = vec.step(("héllo ✓", "世界😀"))
        assert tuple(observations) == ("héllo ✓", "世界😀")
        assert (type(observations) is tuple) is copy_obs
    finally:
        vec.close()
