#!/bin/sh
# Runs on the GPU machine after scripts/bench-device.sh has unpacked the
# binaries: a conversation (run -cnv) all on the GPU and in a hybrid split,
# whose KV cache is kept across turns. Each reply must be run's greedy text for the
# whole conversation so far, also on the GPU.
set -u
B=/tmp/pinfer-bin/pinfer
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
for budget in 1 0.004; do
  OUT=$(printf 'Speak \\\nagain.\n' | $B run -cnv -sys "Be brief." -p "Who art thou?" -n 16 --temp 0 --predictor dense --vram-budget $budget 2>/tmp/cnv.err)
  echo "--- budget $budget"; printf '%s' "$OUT" | od -c | tail -3 | head -2; grep -E 'cached|error|gpu|GPU' /tmp/cnv.err | head -5
  R1=$(printf '%s' "$OUT" | awk 'BEGIN{RS="\n> "} NR==1{sub(/^> Who art thou\?\n/,""); print; exit}')
  R2=$(printf '%s' "$OUT" | awk 'BEGIN{RS="\n> "} NR==2{print; exit}')
  P1="system: Be brief.
user: Who art thou?
assistant:"
  W1=$($B run --temp 0 --predictor dense --vram-budget $budget -n 16 -p "$P1" 2>/dev/null); W1=${W1#"$P1"}
  P2="$P1$R1
user: Speak 
again.
assistant:"
  W2=$($B run --temp 0 --predictor dense --vram-budget $budget -n 16 -p "$P2" 2>/dev/null); W2=${W2#"$P2"}
  [ "$R1" = "$W1" ] && echo "turn 1 matches run" || echo "TURN 1 DIFFERS: [$R1] vs [$W1]"
  [ "$R2" = "$W2" ] && echo "turn 2 matches run" || echo "TURN 2 DIFFERS: [$R2] vs [$W2]"
done
