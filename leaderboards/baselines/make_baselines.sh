#!/usr/bin/env bash
# Regenerates the committed baseline bundles in leaderboards/baselines/ and rebuilds the database.
#   bash leaderboards/baselines/make_baselines.sh [random|oracle|smollm2|all]   (default all)
# Every eval is resumable: rerun the same line after an interruption and it continues.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT=leaderboards/baselines
# Every registered id that needs no user data (MathFile-v0 needs a dataset_file=).
ENVS=(Sokoban-v0 SokobanHard-v0 FrozenLake-v0 FrozenLakeSlippery-v0 Bandit-v0 BanditHeldOut-v0
      Countdown-v0 Math-v0 MathArithmetic-v0 MathChainSum-v0)
# SmolLM2 on a CPU is slow: the one-turn envs first, one bundle per env so each lands on its own.
SMOL_ENVS=(Bandit-v0 BanditHeldOut-v0 Countdown-v0 MathArithmetic-v0 MathChainSum-v0 Math-v0
           FrozenLake-v0 Sokoban-v0 FrozenLakeSlippery-v0 SokobanHard-v0)
what=${1:-all}
env_args=()
for e in "${ENVS[@]}"; do env_args+=(--env "$e"); done

if [[ $what == random || $what == all ]]; then
    agentgym eval "${env_args[@]}" --agent random --episodes 100 --seed 0 --out "$OUT/random.json"
fi
if [[ $what == oracle || $what == all ]]; then
    agentgym eval "${env_args[@]}" --agent oracle --episodes 100 --seed 0 --out "$OUT/oracle.json"
fi
if [[ $what == smollm2 || $what == all ]]; then
    for e in "${SMOL_ENVS[@]}"; do
        /usr/bin/time -f "$e: %e s" agentgym eval --env "$e" --agent hf:embedded \
            --agent-kw max_new_tokens=128 --agent-kw batch_size=16 --episodes 16 --seed 0 \
            --out "$OUT/smollm2-135m-instruct_${e}.json"
    done
fi
python -m leaderboards rebuild --db "${AGENTGYM_LEADERBOARD:-leaderboard.sqlite}"
