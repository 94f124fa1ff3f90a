"""The environments, and the one table that registers every id (``agentgym list`` prints it)."""

from __future__ import annotations

from agentgym.registration import EnvEntry, register_env

ENTRIES: tuple[EnvEntry, ...] = (
    EnvEntry(
        id="agentgym/Sokoban-v0",
        entry_point="agentgym.envs.sokoban:SokobanEnv",
        summary="Push 1 box onto its target in a 6x6 room; 10 actions over up to 5 turns.",
        default_kwargs={
            "dim_room": (6, 6),
            "num_boxes": 1,
            "max_steps": 10,
            "max_turns": 5,
            "max_actions_per_turn": 5,
        },
    ),
    EnvEntry(
        id="agentgym/SokobanHard-v0",
        entry_point="agentgym.envs.sokoban:SokobanEnv",
        summary="Sokoban, 8x8 room with 2 boxes; 30 actions over up to 10 turns.",
        task_kwargs={"dim_room": (8, 8), "num_boxes": 2},
        default_kwargs={"max_steps": 30, "max_turns": 10, "max_actions_per_turn": 5},
    ),
    EnvEntry(
        id="agentgym/FrozenLake-v0",
        entry_point="agentgym.envs.frozen_lake:FrozenLakeEnv",
        summary="Walk a random 4x4 frozen lake to the goal without falling into a hole.",
        default_kwargs={
            "size": 4,
            "p": 0.8,
            "is_slippery": False,
            "max_turns": 5,
            "max_actions_per_turn": 3,
        },
    ),
    EnvEntry(
        id="agentgym/FrozenLakeSlippery-v0",
        entry_point="agentgym.envs.frozen_lake:FrozenLakeEnv",
        summary="FrozenLake on slippery ice: a move goes sideways with probability 2/3.",
        task_kwargs={"is_slippery": True},
        default_kwargs={"size": 4, "p": 0.8, "max_turns": 10, "max_actions_per_turn": 3},
    ),
    EnvEntry(
        id="agentgym/Bandit-v0",
        entry_point="agentgym.envs.bandit:BanditEnv",
        summary="Two arms with semantic names, a safe low arm and a risky high arm; one pull.",
        task_kwargs={"name_split": "train"},
        default_kwargs={"max_turns": 1, "max_actions_per_turn": 1},
    ),
    EnvEntry(
        id="agentgym/BanditHeldOut-v0",
        entry_point="agentgym.envs.bandit:BanditEnv",
        summary="Bandit-v0 with held-out arm names, for testing generalisation.",
        task_kwargs={"name_split": "heldout"},
        default_kwargs={"max_turns": 1, "max_actions_per_turn": 1},
    ),
    EnvEntry(
        id="agentgym/Countdown-v0",
        entry_point="agentgym.envs.countdown:CountdownEnv",
        summary="Reach a target with the given numbers and + - * /, each number at most once.",
        default_kwargs={"num_numbers": 4, "max_turns": 1, "max_actions_per_turn": 1},
    ),
)


def register_all() -> None:
    """Register every id in :data:`ENTRIES` (idempotent)."""
    for entry in ENTRIES:
        register_env(entry)
