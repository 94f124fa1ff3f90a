#!/usr/bin/env bash
# The CPU recipe for SmolLM2-135M, end to end, with its figures (docs/training.md, "The CPU recipe").
#
#   bash benchmarks/recipe_cpu.sh [ENV] [OUT] [key=value ...]
#
# ENV is frozen_lake (the default, the recipe) or sokoban; OUT defaults to runs/recipe-ENV.
# 1. a random agent on the validation seeds (1,000,000 on): the floor to beat;
# 2. export-sft: 64 oracle episodes (seeds 2,000,000 on), then baselines.sft with
#    baselines/configs/sft/ENV.yaml (2 epochs), under /usr/bin/time -v (peak RSS); an SFT run
#    that was stopped continues (--resume), a finished one is kept;
# 3. RL from the warm start with baselines/configs/ENV_cpu.yaml (GRPO, validation on the held-out
#    seeds before training and every rollout.val_every steps), under /usr/bin/time -v;
# 4. the figures: peak RSS and seconds per step of SFT and RL, held-out success and valid-action
#    rate before and after RL, the learning curve, the machine's load.
# Extra key=value arguments are passed to the RL run (e.g. train.steps=8). Needs GNU time
# (`apt-get install time`) for the peak RSS. Never run by tests.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
env="${1:-frozen_lake}"
case "$env" in
frozen_lake) env_id=FrozenLake-v0 ;;
sokoban) env_id=Sokoban-v0 ;;
*)
    echo "recipe_cpu.sh: ENV must be frozen_lake or sokoban, got '$env'" >&2
    exit 2
    ;;
esac
out="${2:-runs/recipe-$env}"
shift $(($# < 2 ? $# : 2))
mkdir -p "$out"
val_episodes=$(python -c "import yaml; print(yaml.safe_load(open('baselines/configs/${env}_cpu.yaml'))['rollout']['val_episodes'])")
timed() { # timed LOG CMD...: run CMD under GNU time, its report in LOG
    local log="$1"
    shift
    /usr/bin/time -v -o "$log" "$@"
}
peak_gb() { awk '/Maximum resident set size/ { printf "%.2f", $NF * 1024 / 1e9 }' "$1"; }
# GNU time reports one process's peak: vLLM (rollout.engine=auto where it is installed) runs in
# the trainer's process, so that its weights and key/value cache are in the figure.
export VLLM_ENABLE_V1_MULTIPROCESSING="${VLLM_ENABLE_V1_MULTIPROCESSING:-0}"

echo "== load before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs; commit $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (dirty)')"

echo "== random agent on the validation seeds"
agentgym eval --agent random --env "agentgym/$env_id" --episodes "$val_episodes" --seed 1000000 \
    --out "$out/random.json" --overwrite --no-progress >/dev/null

echo "== warm start"
if [ ! -f "$out/sft.jsonl" ]; then
    agentgym export-sft --env "$env_id" --episodes 64 --out "$out/sft.jsonl"
fi
if [ ! -f "$out/sft/checkpoint/state.json" ] || ! grep -q '"finished": true' "$out/sft/checkpoint/state.json"; then
    resume=()
    [ -d "$out/sft" ] && resume=(--resume)
    timed "$out/sft.time" python -m baselines.sft --config "baselines/configs/sft/$env.yaml" \
        "${resume[@]}" "sft.data=$out/sft.jsonl" "sft.out_dir=$out/sft" sft.save_every=5 --quiet
fi

echo "== RL"
rm -rf "$out/rl"
timed "$out/rl.time" python -m baselines.train --config "baselines/configs/${env}_cpu.yaml" \
    "model.path=$out/sft/checkpoint" "train.out_dir=$out/rl" "$@"

echo "== figures (load after: $(cut -d' ' -f1-3 /proc/loadavg))"
python - "$out" "$(peak_gb "$out/sft.time" 2>/dev/null || echo nan)" "$(peak_gb "$out/rl.time")" <<'EOF'
import json, statistics, sys
from pathlib import Path

out, sft_peak, rl_peak = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
summary = json.loads((out / "random.json").read_text())["runs"][0]["summary"]
low, high = summary["success_ci95"]
print(
    f"random agent: held-out success {summary['success_rate']:.3f} [{low:.3f}, {high:.3f}] on "
    f"{summary['episodes']} episodes"
)
sft = [json.loads(x) for x in (out / "sft" / "metrics.jsonl").read_text().splitlines()]
print(
    f"SFT: {len(sft)} steps, {statistics.median(r['timing/step_s'] for r in sft):.1f} s/step "
    f"(median), loss {sft[0]['sft/loss']:.3f} -> {sft[-1]['sft/loss']:.3f}, peak RSS {sft_peak} GB"
)
rl = [json.loads(x) for x in (out / "rl" / "metrics.jsonl").read_text().splitlines()]
steps = [r["timing/step_s"] for r in rl]
print(
    f"RL: {len(rl)} steps, {statistics.median(steps):.1f} s/step (median; generation "
    f"{statistics.median(r['timing/generation_s'] for r in rl):.1f} s, update "
    f"{statistics.median(r['timing/backward_s'] or 0 for r in rl):.1f} s), "
    f"{sum(steps) / 60:.1f} min of steps, peak RSS {rl_peak} GB"
)
first = rl[0]
print(
    f"held-out before RL: success {first['val_initial/success_rate']:.3f}, valid actions "
    f"{first['val_initial/valid_action_rate']:.3f}"
)
print("learning curve (updates done: held-out success, valid-action rate; train success):")
for r in rl:
    val = r.get("val/success_rate")
    line = f"  {int(r['step']) + 1:>3}: train success {r['rollout/success_rate']:.3f}"
    if val is not None:
        line += f"; held-out success {val:.3f}, valid {r['val/valid_action_rate']:.3f}"
    print(line)
EOF
