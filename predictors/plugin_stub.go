package predictors

import "fmt"

// LoadPlugin loads a predictor script; the yaegi host is not built yet.
func LoadPlugin(path string, layers []*Layer) (Predictor, error) {
	return nil, fmt.Errorf("%s: predictor plugins are not supported yet", path)
}
