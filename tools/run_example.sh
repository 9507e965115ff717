#!/usr/bin/env bash
# The main job: greedy decoding of a small bundled model with mpk-run. Uses the GPU when one
# is usable; otherwise mpk says so and runs the CPU reference.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${MPK_MODEL:-tests/data/qwen3-bf16}
build/bin/mpk-run --model "$model" --info
build/bin/mpk-run --model "$model" --prompt-ids 5,17,300,42,7 --max-new-tokens 16
