//go:build amd64 && !purego

package avx2

import "github.com/klauspost/cpuid/v2"

func init() {
	Available = cpuid.CPU.Supports(cpuid.AVX2, cpuid.FMA3, cpuid.F16C, cpuid.POPCNT)
	AVX512 = Available && has512()
}
