package train

import (
	"fmt"
	"math"
)

// Small dense linear algebra in float64 for the linear start. Matrices are
// row-major slices.

// cholesky factors the symmetric positive definite n x n matrix a in place
// into its lower triangle L (a = L Lᵀ).
func cholesky(a []float64, n int) error {
	for j := range n {
		s := a[j*n+j]
		for k := range j {
			s -= a[j*n+k] * a[j*n+k]
		}
		if s <= 0 {
			return fmt.Errorf("the input covariance is singular at dimension %d", j)
		}
		d := math.Sqrt(s)
		a[j*n+j] = d
		for i := j + 1; i < n; i++ {
			s := a[i*n+j]
			for k := range j {
				s -= a[i*n+k] * a[j*n+k]
			}
			a[i*n+j] = s / d
		}
	}
	return nil
}

// cholSolve overwrites b (n values) with a⁻¹b, given cholesky's factor.
func cholSolve(l []float64, n int, b []float64) {
	for i := range n {
		s := b[i]
		for k := range i {
			s -= l[i*n+k] * b[k]
		}
		b[i] = s / l[i*n+i]
	}
	solveUpper(l, n, b)
}

// solveUpper overwrites b with L⁻ᵀ b, given cholesky's factor L.
func solveUpper(l []float64, n int, b []float64) {
	for i := n - 1; i >= 0; i-- {
		s := b[i]
		for k := i + 1; k < n; k++ {
			s -= l[k*n+i] * b[k]
		}
		b[i] = s / l[i*n+i]
	}
}

// orthonormalize makes the k columns of the n x k matrix q orthonormal
// (modified Gram-Schmidt); a column that vanishes is left at zero.
func orthonormalize(q []float64, n, k int) {
	for j := range k {
		for p := range j {
			var d float64
			for i := range n {
				d += q[i*k+j] * q[i*k+p]
			}
			for i := range n {
				q[i*k+j] -= d * q[i*k+p]
			}
		}
		var s float64
		for i := range n {
			s += q[i*k+j] * q[i*k+j]
		}
		if s = math.Sqrt(s); s > 0 {
			for i := range n {
				q[i*k+j] /= s
			}
		}
	}
}
