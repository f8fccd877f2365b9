package ops

// Accel is a device backend (the GPU) that holds some weights. The executor
// stays the same: MatMul and the sparse FFN ask the device first, and what
// it does not hold runs on the CPU kernels. Weights never move per token;
// only activations and partial sums cross.
type Accel interface {
	// MatMul computes out = x·mᵀ for T rows when m lives on the device,
	// and reports whether it did.
	MatMul(out []float32, m *Matrix, x []float32, T int) bool
	// FFNStart launches the device's share of a sparse FFN: the neurons it
	// holds (its "hot" neurons) among each token's active set (nil: all).
	// It returns the neurons left to the CPU, per token as explicit
	// ascending lists (cold == nil: none at all), and a wait function that
	// blocks until the device is done and adds its partial sums into out
	// (T rows). ok is false when the device holds none of this FFN.
	FFNStart(f *FFN, down *Matrix, x []float32, T int, actives [][]int32) (cold [][]int32, wait func(out []float32), ok bool)
}

// Device is the active device backend; nil runs everything on the CPU.
var Device Accel
