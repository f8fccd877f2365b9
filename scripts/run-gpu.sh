#!/bin/sh
# Runs on the GPU machine, which has no Go toolchain, what
# scripts/build-cuda.sh built: the CUDA kernel tests, the bandwidth report
# (gather mat-vec against device-to-device copy), the host-timed benchmarks
# and a memcheck pass. Logs go to $OUT (default build/gpu-results). Exits
# non-zero if any step failed.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-build/gpu-results}
mkdir -p "$OUT"
BIN=build/cuda/ops_cuda.test
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
status=0
step() { # name, command...
	name=$1
	shift
	echo "== $name"
	if ! "$@" >"$OUT/$name.log" 2>&1; then
		echo "FAILED: $name"
		status=1
	fi
	tail -n 40 "$OUT/$name.log"
}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv >"$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
step tests $BIN -test.v -test.count=1 -test.timeout=300s
step bandwidth env PINFER_CUDA_BENCH=1 $BIN -test.v -test.run=TestBandwidth -test.timeout=300s
step bench $BIN -test.run='^$' -test.bench=. -test.benchtime=2000x -test.timeout=300s
if command -v compute-sanitizer >/dev/null; then
	step memcheck timeout 180 compute-sanitizer --tool memcheck --error-exitcode 9 \
		$BIN -test.short -test.run='TestMatVec|TestAxpy|TestRMSNorm|TestRoPE|TestAttention|TestGraph'
fi
exit $status
