package engine

import (
	"fmt"
	"strings"

	"github.com/pinfer/pinfer/predictors"
)

// Predictor makes the named predictor for this model: a built-in name, or
// the path of a plugin's .go file. An empty name picks mlp when the file
// carries fc1/fc2 for every sparse layer, else dense. The dense predictor
// has the model pack its FFNs for dense reads (PackDense).
//
// A model without sparse FFN layers runs dense whatever is named, so naming
// any predictor but dense for it is an error rather than silently ignored.
func (m *Model) Predictor(name string) (predictors.Predictor, error) {
	if len(m.Prog.Layers) == 0 && name != "" && name != "dense" {
		return nil, fmt.Errorf("predictor %s: %s: the model has no sparse FFN layers", name, m.Path)
	}
	if name == "" {
		name = "dense"
		if m.HasPredictor() {
			name = "mlp"
		}
	}
	if name == "dense" {
		if err := m.PackDense(); err != nil {
			return nil, err
		}
	}
	if strings.HasSuffix(name, ".go") {
		return predictors.LoadPlugin(name, m.Prog.Layers)
	}
	return predictors.New(name, m.Prog.Layers)
}

// HasPredictor reports whether the file carries a trained predictor
// (fc1/fc2) for its sparse FFNs.
func (m *Model) HasPredictor() bool {
	return len(m.Prog.Layers) > 0 && m.Prog.Layers[0].FC1 != nil
}

// AttachStats gives the model's sparse layers their profiled rates.
func (m *Model) AttachStats(path string) error {
	s, err := predictors.ReadStats(path)
	if err != nil {
		return err
	}
	return s.Attach(path, m.Prog.Layers)
}
