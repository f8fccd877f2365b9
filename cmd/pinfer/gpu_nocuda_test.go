//go:build !cuda

package main

import "testing"

// A build without CUDA refuses every GPU flag on bench as run does: one
// line naming the flag, before anything is measured, where bench used to
// run on the CPU alone and exit 0.
func TestNoCUDARefusesGPUFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--vram-budget", "4"}, "--vram-budget 4: this pinfer was built without CUDA"},
		{[]string{"bench", "--vram-budget", "-1"}, "--vram-budget -1"},
		{[]string{"bench", "--reset-gpu-index"}, "--reset-gpu-index: this pinfer was built without CUDA"},
		{[]string{"bench", "--disable-gpu-index"}, "--disable-gpu-index: this pinfer was built without CUDA"},
		{[]string{"run", "-p", "ROMEO:", "--reset-gpu-index"}, "--reset-gpu-index: this pinfer was built without CUDA"},
		{[]string{"run", "-p", "ROMEO:", "--disable-gpu-index"}, "--disable-gpu-index: this pinfer was built without CUDA"},
	} {
		args := append(c.args, "-n", "2")
		if c.args[0] == "bench" {
			args = append(args, "-p", "4", "-r", "1")
		}
		refused(t, args, c.want)
	}
}
