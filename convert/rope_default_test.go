package convert

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A config without rope_theta gets its family's transformers default, the
// value transformers itself wrote into each fixture's config (Mixtral's is
// 1e6, LLaMA's and Mistral's 10000).
func TestConvertRopeThetaDefault(t *testing.T) {
	for _, name := range []string{"llama-relu", "mistral-relu", "mixtral-relu-moe"} {
		t.Run(name, func(t *testing.T) {
			src := filepath.Join(sharedModels(t), "arch", name)
			c := readConfigMap(t, src)
			want, ok := c["rope_theta"].(float64)
			if !ok {
				want = c["rope_parameters"].(map[string]any)["rope_theta"].(float64)
			}
			dir := copyModel(t, src, func(c map[string]any) {
				delete(c, "rope_theta")
				delete(c, "rope_parameters")
			}, nil)
			f, _ := convertLogged(t, dir)
			got, err := f.Float("llama.rope.freq_base")
			require.NoError(t, err)
			require.Equal(t, want, got)
		})
	}
}
