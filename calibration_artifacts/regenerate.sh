#!/usr/bin/env bash
# Rewrites every shipped artifact from the embedded AgentDojo corpus (bit for bit: artifacts hold no
# timestamps), then copies the CARB ones into the package data that the suite policies point at.
set -euo pipefail
cd "$(dirname "$0")/.."
for corpus in all claude-3-7-sonnet-20250219 command-r-plus gpt-4o-2024-05-13 meta-llama_Llama-3-70b-chat-hf meta-llama_Llama-3.3-70B-Instruct; do
  name=$corpus; [ "$corpus" = all ] && name=pooled
  for alpha in 0.05 0.10; do
    carbguard calibrate --corpus "$corpus" --alpha "$alpha" --selector gcarb \
      --out "calibration_artifacts/agentdojo/${name}_a${alpha}.json"
  done
done
# held out for `carbguard agentdojo run --corpus gpt-4o-2024-05-13` (not calibrated on gpt-4o's runs)
carbguard calibrate --corpus all --exclude-model gpt-4o-2024-05-13 --alpha 0.1 \
  --out calibration_artifacts/agentdojo/pooled-without-gpt-4o_a0.10.json
mkdir -p guard/data/calibration_artifacts/agentdojo
cp calibration_artifacts/agentdojo/*.json guard/data/calibration_artifacts/agentdojo/
# SafeCommit kappa artifacts (conformal threshold over world scores; see README "SafeCommit"), gated by the
# pooled CARB artifact of the same alpha, which the suite policies name
for alpha in 0.05 0.10; do
  carbguard safecommit calibrate --alpha "$alpha" --gate-artifact "calibration_artifacts/agentdojo/pooled_a${alpha}.json" \
    --out "calibration_artifacts/safecommit/agentdojo_kappa_a${alpha}.json"
done
mkdir -p guard/data/calibration_artifacts/safecommit
cp calibration_artifacts/safecommit/*.json guard/data/calibration_artifacts/safecommit/
