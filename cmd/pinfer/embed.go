package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/ops"
)

// embedCmd is llama.cpp's llama-embedding: the embedding of each of a
// text's parts, as the server's /v1/embeddings gives them.
func embedCmd() *cobra.Command {
	var mf modelFlags
	var prompt, file, pooling, format, sep string
	var norm, nctx int
	c := &cobra.Command{
		Use:   "embed (-p TEXT | -f FILE)",
		Short: "Print the embeddings of texts, as llama.cpp's llama-embedding",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			text, err := promptText(prompt, file)
			if err != nil {
				return err
			}
			if !slices.Contains(engine.Poolings, pooling) {
				return fmt.Errorf("--pooling %q: want one of %s", pooling, strings.Join(engine.Poolings, ", "))
			}
			switch format {
			case "", "array", "json", "json+":
			default:
				return fmt.Errorf("--embd-output-format %q: want \"\" (text), array, json or json+", format)
			}
			if sep == "" {
				return fmt.Errorf("--embd-separator: want a separator, \"\\n\" by default")
			}
			parts := strings.Split(text, unescape(sep))
			m, err := mf.load()
			if err != nil {
				return err
			}
			defer m.Close()
			p, err := m.HiddenProgram()
			if err != nil {
				return err
			}
			pred, err := m.Predictor(mf.predictor)
			if err != nil {
				return err
			}
			nctx = m.Context(nctx)
			pool := ops.NewPool(mf.threads)
			defer pool.Close()
			r := p.NewRunner(pool)
			r.Predictor = pred
			sess := m.NewSessionOn(p, nctx, pool)
			var vecs [][]float32
			for i, part := range parts {
				ids := m.Encode(part)
				if len(ids) == 0 { // an empty part, and a model that adds no BOS
					return fmt.Errorf("part %d of the text has no tokens", i)
				}
				if len(ids) > nctx {
					return fmt.Errorf("part %d of the text has %d tokens, more than the context of %d (raise -c)", i, len(ids), nctx)
				}
				v, err := m.Embed(r, sess, ids, pooling, norm)
				if err != nil {
					return err
				}
				vecs = append(vecs, v...)
			}
			return writeEmbeddings(cmd.OutOrStdout(), vecs, format)
		},
	}
	mf.add(c)
	fl := c.Flags()
	fl.StringVarP(&prompt, "prompt", "p", "", "the text; --embd-separator splits it into the texts to embed")
	fl.StringVarP(&file, "file", "f", "", "read the text from a file")
	fl.IntVarP(&nctx, "ctx-size", "c", 0, "context size (default: the model's, at most 4096)")
	fl.StringVar(&pooling, "pooling", engine.PoolingMean, "how a text's hidden states become one vector: mean, last, cls (the first token's, llama.cpp's cls) or none (a vector for each token)")
	fl.IntVar(&norm, "embd-normalize", 2, "normalization, as llama.cpp's: -1 none, 0 max absolute (to 32760), 1 taxicab, 2 euclidean, >2 p-norm")
	fl.StringVar(&format, "embd-output-format", "", `"" (text: each vector, then the cosine similarities), array (a JSON array of vectors), json (OpenAI's list), json+ (and the cosine similarities)`)
	fl.StringVar(&sep, "embd-separator", "\n", `what separates the texts to embed ("\n": one a line)`)
	return c
}

// promptText is -p's text or -f's file's.
func promptText(prompt, file string) (string, error) {
	switch {
	case prompt != "" && file != "":
		return "", fmt.Errorf("-p and -f both give the text: use one of them")
	case file != "":
		b, err := os.ReadFile(file)
		return strings.TrimSuffix(string(b), "\n"), err
	case prompt == "":
		return "", fmt.Errorf("a text is needed: -p TEXT or -f FILE")
	}
	return prompt, nil
}

// unescape reads the escapes llama.cpp's flags take (\n, \t, \\).
func unescape(s string) string {
	return strings.NewReplacer(`\n`, "\n", `\t`, "\t", `\\`, `\`).Replace(s)
}

func writeEmbeddings(w io.Writer, vecs [][]float32, format string) error {
	switch format {
	case "array":
		return json.NewEncoder(w).Encode(vecs)
	case "json", "json+":
		type item struct {
			Object    string    `json:"object"`
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		out := struct {
			Object string      `json:"object"`
			Data   []item      `json:"data"`
			Cosine [][]float64 `json:"cosineSimilarity,omitempty"`
		}{Object: "list"}
		for i, v := range vecs {
			out.Data = append(out.Data, item{"embedding", i, v})
		}
		if format == "json+" && len(vecs) > 1 {
			out.Cosine = cosines(vecs)
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	for i, v := range vecs {
		fmt.Fprintf(w, "embedding %d:", i)
		for _, x := range v {
			fmt.Fprintf(w, " %9.6f", x)
		}
		fmt.Fprintln(w)
	}
	if len(vecs) > 1 {
		fmt.Fprintln(w, "\ncosine similarity matrix:")
		for _, row := range cosines(vecs) {
			for _, x := range row {
				fmt.Fprintf(w, " %6.2f", x)
			}
			fmt.Fprintln(w)
		}
	}
	return nil
}

// cosines is the matrix of the vectors' cosine similarities.
func cosines(vecs [][]float32) [][]float64 {
	out := make([][]float64, len(vecs))
	for i, a := range vecs {
		out[i] = make([]float64, len(vecs))
		for j, b := range vecs {
			var ab, aa, bb float64
			for k := range a {
				ab += float64(a[k]) * float64(b[k])
				aa += float64(a[k]) * float64(a[k])
				bb += float64(b[k]) * float64(b[k])
			}
			if aa > 0 && bb > 0 {
				out[i][j] = ab / math.Sqrt(aa*bb)
			}
		}
	}
	return out
}
