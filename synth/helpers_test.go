package synth

import "github.com/pinfer/pinfer/sample"

func sampleGreedy() sample.Params { return sample.Params{Temp: 0} }
