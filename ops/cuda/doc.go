// Package cuda is pinfer's NVIDIA GPU backend: decode-time kernels (sparse
// row-gather mat-vec, sparse axpy over neuron-major rows, dense mat-vec,
// rms_norm, rope, attention over a device KV cache) written in kernels.cu,
// compiled by nvcc to kernels.fatbin and embedded, driven through the CUDA
// driver API (gorgonia.org/cu).
//
// Everything that talks to a GPU is behind the build tag "cuda", which needs
// cgo and CUDA's headers; without it the package holds only the pure-Go
// device layout of weight rows (Pack), so the default build stays free of cgo.
package cuda
