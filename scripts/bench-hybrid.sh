#!/bin/sh
# Runs on the GPU machine (no Go there) what scripts/build-cuda.sh built:
# generates the 7B-shape q4_0 model of issue 7, runs the hybrid tests, and
# benches split against hybrid at 25% and 50% of the file and with more
# than the file, 8 CPU threads. BIN holds pinfer and ops_cuda.test (default
# build/cuda); logs and tables go to OUT (default build/gpu-results).
set -u
cd "$(dirname "$0")/.."
BIN=${BIN:-build/cuda}
OUT=${OUT:-build/gpu-results}
MODEL=${MODEL:-/tmp/relu-7b-q4_0.gguf}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$OUT/gpu.txt" 2>&1
nproc >>"$OUT/gpu.txt"
status=0
# The model takes a couple of minutes to write on one core: meanwhile the
# tests that need only the small fixture run.
[ -f "$MODEL" ] || "$BIN/pinfer" gen --shape 7b --active 0.1 --type q4_0 -o "$MODEL" >/tmp/gen.log 2>&1 &
GEN=$!
timeout 240 "$BIN/ops_cuda.test" -test.v -test.count=1 -test.run 'TestBackend|TestHybridGreedyShakespeare' >"$OUT/tests.log" 2>&1 || status=1
wait $GEN || status=1
tail -n 2 /tmp/gen.log
# One profile serves every budget, so each index is placed on the same rates.
yes 'But soft, what light through yonder window breaks? It is the east, and Juliet is the sun.' | head -n 20 >/tmp/cal.txt
STATS=/tmp/profile.json
timeout 90 "$BIN/pinfer" profile -m "$MODEL" -f /tmp/cal.txt -o "$STATS" --plot /tmp/profile.png --max-tokens 64 -t 8 >"$OUT/profile.log" 2>&1 || status=1
SIZE=$(stat -c %s "$MODEL")
for pct in ${PCTS:-50 25 125}; do
	gib=$(awk "BEGIN{printf \"%.3f\", $SIZE*$pct/100/1073741824}")
	echo "== budget $pct% of the file: $gib GiB"
	timeout 150 "$BIN/pinfer" bench -m "$MODEL" -t 8 --mode ${MODES:-split,hybrid,sparse} -p 0 -n 16 -r 3 \
		--vram-budget "$gib" --stats "$STATS" >"$OUT/bench_$pct.txt" 2>&1 || status=1
	grep -v '^\s*$' "$OUT/bench_$pct.txt" | tail -n 16
done
PINFER_7B=$MODEL timeout 150 "$BIN/ops_cuda.test" -test.v -test.count=1 -test.run 'TestHybridGreedy7B' >>"$OUT/tests.log" 2>&1 || status=1
grep -E '^(=== RUN|--- |ok|FAIL|PASS)|Error|expected|actual' "$OUT/tests.log" | head -60
exit $status
