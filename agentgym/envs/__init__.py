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
        summary="Reach a target using every given number exactly once with + - * / (RAGEN's rule).",
        default_kwargs={"num_numbers": 4, "max_turns": 1, "max_actions_per_turn": 1},
    ),
    EnvEntry(
        id="agentgym/Math-v0",
        entry_point="agentgym.envs.math_word:MathEnv",
        summary="GSM8K-style word problems (reasoning-gym gsm_symbolic); 3 attempts with feedback.",
        default_kwargs={
            "task": "gsm_symbolic",
            "reward_decay": 0.5,
            "max_turns": 3,
            "max_actions_per_turn": 1,
        },
    ),
    EnvEntry(
        id="agentgym/MathArithmetic-v0",
        entry_point="agentgym.envs.math_word:MathEnv",
        summary="Arithmetic expressions (reasoning-gym basic_arithmetic); 3 attempts with feedback.",
        task_kwargs={"task": "basic_arithmetic"},
        default_kwargs={"reward_decay": 0.5, "max_turns": 3, "max_actions_per_turn": 1},
    ),
    EnvEntry(
        id="agentgym/MathChainSum-v0",
        entry_point="agentgym.envs.math_word:MathEnv",
        summary="Chains of additions and subtractions (reasoning-gym chain_sum); 3 attempts.",
        task_kwargs={"task": "chain_sum"},
        default_kwargs={"reward_decay": 0.5, "max_turns": 3, "max_actions_per_turn": 1},
    ),
    EnvEntry(
        id="agentgym/MathFile-v0",
        entry_point="agentgym.envs.math_word:MathFileEnv",
        summary="Math problems from your JSONL file (dataset_file=; question/answer); 3 attempts.",
        default_kwargs={"reward_decay": 0.5, "max_turns": 3, "max_actions_per_turn": 1},
    ),
    EnvEntry(
        id="agentgym/WebShop-v0",
        entry_point="agentgym.envs.webshop:WebShopEnv",
        summary="Find and buy the instructed product on a local shop site in headless Chromium.",
        task_kwargs={"backend": "browser"},
        default_kwargs={
            "catalog_seed": 0,
            "num_products": 1000,
            "max_turns": 15,
            "max_actions_per_turn": 1,
        },
    ),
    EnvEntry(
        id="agentgym/WebShopText-v0",
        entry_point="agentgym.envs.webshop:WebShopEnv",
        summary="WebShop-v0 over plain HTTP: the same shop pages turned into the same text.",
        task_kwargs={"backend": "text"},
        default_kwargs={
            "catalog_seed": 0,
            "num_products": 1000,
            "max_turns": 15,
            "max_actions_per_turn": 1,
        },
    ),
    EnvEntry(
        id="agentgym/CodeExec-v0",
        entry_point="agentgym.envs.code_exec:CodeExecEnv",
        summary="Complete a HumanEval function; hidden tests run in a sandbox; up to 3 attempts.",
        task_kwargs={"source": "humaneval"},
        default_kwargs={"backend": "auto", "max_turns": 3, "max_actions_per_turn": 1},
    ),
    EnvEntry(
        id="agentgym/CodeExecGenerated-v0",
        entry_point="agentgym.envs.code_exec:CodeExecEnv",
        summary="Write a small generated Python function (7 families); sandboxed tests; 3 attempts.",
        task_kwargs={"source": "generated"},
        default_kwargs={"backend": "auto", "max_turns": 3, "max_actions_per_turn": 1},
    ),
)


def register_all() -> None:
    """Register every id in :data:`ENTRIES` (idempotent)."""
    for entry in ENTRIES:
        register_env(entry)
