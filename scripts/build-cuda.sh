#!/bin/sh
# Builds pinfer's CUDA binaries on a machine without a GPU: the ops/cuda test
# binary and the cuda-tagged pinfer, into build/cuda/ (git-ignored), and
# gzipped copies in build/gpu/ small enough to carry to the GPU machine.
# Needs cgo and CUDA's headers and libcuda stub (Debian: apt-get install
# nvidia-cuda-toolkit nvidia-cuda-dev, from the contrib and non-free
# components). REGEN=1 first recompiles ops/cuda/kernels.cu with nvcc.
# Run the results on the GPU machine with scripts/run-gpu.sh and
# scripts/bench-device.sh.
set -eu
cd "$(dirname "$0")/.."
export CGO_ENABLED=1
if [ "${REGEN:-0}" = 1 ]; then
	(cd ops/cuda && go generate -tags cuda)
fi
mkdir -p build/cuda build/gpu
go vet -tags cuda ./ops/cuda/ ./hybrid/ ./cmd/pinfer/
go test -c -tags cuda -ldflags="-s -w" -o build/cuda/ops_cuda.test ./ops/cuda
go build -tags cuda -ldflags="-s -w" -o build/cuda/pinfer ./cmd/pinfer
gzip -1 -c build/cuda/ops_cuda.test >build/gpu/ops_cuda.test.gz
gzip -1 -c build/cuda/pinfer >build/gpu/pinfer.gz
ls -l build/cuda build/gpu
