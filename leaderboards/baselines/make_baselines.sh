#!/usr/bin/env bash
# Regenerates the committed baseline bundles in leaderboards/baselines/, then rebuilds the database:
#   bash leaderboards/baselines/make_baselines.sh [random|oracle|smollm2|all]   (default all)
# Every eval is resumable: rerun the same line after an interruption and it continues.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT=leaderboards/baselines
# Every registered id but MathFile-v0, which has bundles of its own (it reads a file: by default
# the 20 problems packaged in agentgym/data/math_sample.jsonl).
ENVS=(Sokoban-v0 SokobanHard-v0 FrozenLake-v0 FrozenLakeSlippery-v0 Bandit-v0 BanditHeldOut-v0
      Countdown-v0 Math-v0 MathArithmetic-v0 MathChainSum-v0)
# Envs whose steps run sandboxed code or a browser: fewer episodes, a bundle of their own.
HEAVY_ENVS=(CodeExec-v0 CodeExecGenerated-v0 WebShopText-v0 WebShop-v0)
# MiniWoB++ in headless Chromium, a bundle of its own: HTML's 280 episodes are its 56 tasks x 5
# seeds, Train's 62 each of its tasks once, MiniWoB-v0 (click-test) 20. MiniWoBAll-v0 and
# MiniWoBHeldOut-v0 are nondeterministic (stock-market, terminal) and have no leaderboard.
MINIWOB_RUNS=("MiniWoBHTML-v0 280" "MiniWoBTrain-v0 62" "MiniWoB-v0 20")
# CodeExec's v1 (pass or fail per attempt), v2 (public and hidden tests) and v3 (the hidden tests
# judged at the episode's end), bundles of their own beside the v0 ones.
CODE_V1_ENVS=(CodeExec-v1 CodeExecGenerated-v1)
CODE_V2_ENVS=(CodeExec-v2 CodeExecGenerated-v2)
CODE_V3_ENVS=(CodeExec-v3 CodeExecGenerated-v3)
# SmolLM2 on a CPU is slow: the one-turn envs with 16 episodes, the multi-turn ones with 8 (and
# 96 new tokens a turn), one bundle per env so each lands on its own.
SMOL_ENVS=(Bandit-v0 BanditHeldOut-v0 Countdown-v0 MathArithmetic-v0 MathChainSum-v0)
SMOL_MULTI_ENVS=(Math-v0 FrozenLake-v0 Sokoban-v0 FrozenLakeSlippery-v0 SokobanHard-v0 MathFile-v0)
what=${1:-all}
env_args=() heavy_args=() code_v1_args=() code_v2_args=() code_v3_args=()
for e in "${ENVS[@]}"; do env_args+=(--env "$e"); done
for e in "${HEAVY_ENVS[@]}"; do heavy_args+=(--env "$e"); done
for e in "${CODE_V1_ENVS[@]}"; do code_v1_args+=(--env "$e"); done
for e in "${CODE_V2_ENVS[@]}"; do code_v2_args+=(--env "$e"); done
for e in "${CODE_V3_ENVS[@]}"; do code_v3_args+=(--env "$e"); done

for agent in random oracle; do
    if [[ $what == "$agent" || $what == all ]]; then
        agentgym eval "${env_args[@]}" --agent $agent --episodes 100 --seed 0 \
            --out "$OUT/$agent.json"
        agentgym eval "${heavy_args[@]}" --agent $agent --episodes 20 --seed 0 \
            --out "$OUT/$agent-heavy.json"
        agentgym eval --env MathFile-v0 --agent $agent --episodes 20 --seed 0 \
            --out "$OUT/$agent-mathfile.json"
        agentgym eval "${code_v1_args[@]}" --agent $agent --episodes 20 --seed 0 \
            --out "$OUT/$agent-code-v1.json"
        agentgym eval "${code_v2_args[@]}" --agent $agent --episodes 20 --seed 0 \
            --out "$OUT/$agent-code-v2.json"
        agentgym eval "${code_v3_args[@]}" --agent $agent --episodes 20 --seed 0 \
            --out "$OUT/$agent-code-v3.json"
        for run in "${MINIWOB_RUNS[@]}"; do
            read -r e n <<<"$run"
            [[ $agent == random ]] && spec=agentgym.envs.miniwob:MiniWoBRandomAgent || spec=oracle
            agentgym eval --env "$e" --agent "$spec" --agent-name "$agent" --episodes "$n" \
                --seed 0 --out "$OUT/$agent-miniwob_${e}.json"
        done
    fi
done
# smol MAX_NEW_TOKENS BATCH_SIZE EPISODES ENV...: SmolLM2 zero-shot (greedy) on each ENV, timed.
smol() {
    local tokens=$1 batch=$2 episodes=$3 e
    shift 3
    for e in "$@"; do
        /usr/bin/time -f "$e: %e s" agentgym eval --env "$e" --agent hf:embedded \
            --agent-kw max_new_tokens="$tokens" --agent-kw batch_size="$batch" \
            --agent-kw max_context_tokens="${SMOL_CONTEXT:-4096}" \
            --episodes "$episodes" --seed 0 \
            --agent-name "SmolLM2-135M-Instruct zero-shot (greedy)" \
            --out "$OUT/smollm2-135m-instruct_${e}.json"
    done
}
if [[ $what == smollm2 || $what == all ]]; then
    smol 128 16 16 "${SMOL_ENVS[@]}"
    smol 96 8 8 "${SMOL_MULTI_ENVS[@]}"
    smol 256 8 8 CodeExec-v0 CodeExecGenerated-v0 "${CODE_V1_ENVS[@]}" "${CODE_V2_ENVS[@]}" \
        "${CODE_V3_ENVS[@]}"
    smol 64 4 4 WebShopText-v0 WebShop-v0
    SMOL_CONTEXT=8192 smol 64 4 4 MiniWoB-v0 MiniWoBTrain-v0  # long pages: SmolLM2's 8k context
    SMOL_CONTEXT=8192 smol 64 8 56 MiniWoBHTML-v0
fi
python -m leaderboards rebuild --db "${AGENTGYM_LEADERBOARD:-leaderboard.sqlite}"
