#!/bin/sh
# Runs on the GPU machine (no Go there) what scripts/build-cuda.sh built,
# from build/gpu/*.gz: the CUDA tests (kernels, hybrid and all-on-the-GPU
# greedy runs), the bandwidth report, and the decode benchmark of the 7B
# q4_0 file of issue 7 with everything on the GPU and at a quarter and half
# of the file (FRACS).
# Logs go to OUT (default build/gpu-results).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-build/gpu-results}
MODEL=${MODEL:-/tmp/relu-7b-q4_0.gguf}
BIN=/tmp/pinfer-bin
mkdir -p "$OUT" "$BIN"
for f in build/gpu/*.gz; do gzip -dc "$f" >"$BIN/$(basename "$f" .gz)"; done
chmod +x "$BIN"/*
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
status=0
[ -f "$MODEL" ] || "$BIN/pinfer" gen --shape 7b --active 0.1 --type q4_0 -o "$MODEL" >/tmp/gen.log 2>&1 &
GEN=$!
echo "== tests"
timeout 200 "$BIN/ops_cuda.test" -test.v -test.count=1 -test.skip 'Greedy7B|TestBandwidth' >"$OUT/tests.log" 2>&1 || status=1
grep -E '^(--- |ok|FAIL|PASS)|Error|expected|actual|_test.go' "$OUT/tests.log" | grep -v '^    cuda_test.go:30' | head -70
if [ -z "${SKIP_BW:-}" ]; then
	echo "== bandwidth"
	PINFER_CUDA_BENCH=1 timeout 120 "$BIN/ops_cuda.test" -test.v -test.count=1 -test.run TestBandwidth >"$OUT/bandwidth.log" 2>&1
	grep -E 'cuda_test.go:[0-9]+: (dev|ker|gather|dense|axpy)|FAIL|PASS' "$OUT/bandwidth.log"
fi
wait $GEN || status=1
tail -n 1 /tmp/gen.log
SIZE=$(stat -c %s "$MODEL")
echo "== all on the GPU"
timeout 150 "$BIN/pinfer" bench -m "$MODEL" -t 8 --mode ${MODES_ALL:-hybrid,split} -p 0 -n 32 -r 3 \
	--vram-budget $(awk "BEGIN{printf \"%.3f\", $SIZE*1.25/1073741824}") >"$OUT/bench_all.txt" 2>&1 || status=1
grep -v '^\s*$' "$OUT/bench_all.txt" | tail -n 12
# Part of the file on the GPU: hybrid against the llama.cpp layer split and
# CPU-only sparse decode, in one bench run per budget (fractions of the file).
if [ -n "${FRACS:-0.25 0.5}" ]; then
yes 'But soft, what light through yonder window breaks? It is the east, and Juliet is the sun.' | head -n 20 >/tmp/cal.txt
timeout 90 "$BIN/pinfer" profile -m "$MODEL" -f /tmp/cal.txt -o /tmp/profile.json --max-tokens 32 -t 8 >"$OUT/profile.log" 2>&1 || status=1
for f in ${FRACS:-0.25 0.5}; do
	echo "== $f of the file"
	timeout 150 "$BIN/pinfer" bench -m "$MODEL" -t 8 --mode ${MODES_PART:-hybrid,split,sparse} -p 0 -n 16 -r 3 --stats /tmp/profile.json \
		--vram-budget $(awk "BEGIN{printf \"%.3f\", $SIZE*$f/1073741824}") >"$OUT/bench_$f.txt" 2>&1 || status=1
	grep -v '^\s*$' "$OUT/bench_$f.txt" | tail -n 8
done
fi
echo "== 7B greedy"
PINFER_7B=$MODEL timeout 240 "$BIN/ops_cuda.test" -test.v -test.count=1 -test.run 'Greedy7B' >"$OUT/tests7b.log" 2>&1 || status=1
grep -E '^(--- |ok|FAIL|PASS)|Error|expected|actual|Messages|hybrid_test' "$OUT/tests7b.log" | head -30
exit $status
