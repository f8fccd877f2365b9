package main

import (
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/ops"
)

// showCmd is ollama's `show` for a GGUF file, with what a sparse engine adds:
// the graph the file binds to, its sparse FFNs and the predictor run would
// use. -v lists the metadata and the tensors, as gguf-dump does.
func showCmd() *cobra.Command {
	var model string
	var verbose, template, license bool
	c := &cobra.Command{
		Use:   "show [-m FILE]",
		Short: "Describe a model file: architecture, size, sparsity and predictor (-v: its metadata and tensors)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, err := modelPath(model)
			if err != nil {
				return err
			}
			f, err := gguf.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			w := cmd.OutOrStdout()
			switch {
			case template:
				s, err := f.String("tokenizer.chat_template")
				if err != nil {
					return fmt.Errorf("show: %s: the file has no chat template (tokenizer.chat_template)", path)
				}
				fmt.Fprintln(w, s)
				return nil
			case license:
				s, err := f.String("general.license")
				if err != nil {
					return fmt.Errorf("show: %s: the file names no license (general.license)", path)
				}
				fmt.Fprintln(w, s)
				return nil
			}
			// Describe does not pack weights: a description must not cost
			// a load's repacking.
			ops.Repack = false
			m, bindErr := engine.Load(path, "")
			if m != nil {
				defer m.Close()
			}
			describe(w, f, m, bindErr)
			if verbose {
				dump(w, f)
			}
			return nil
		},
	}
	c.Flags().StringVarP(&model, "model", "m", "", "GGUF model file (default: the built-in Shakespeare model)")
	c.Flags().BoolVarP(&verbose, "verbose", "v", false, "also list the metadata and the tensors")
	c.Flags().BoolVar(&template, "template", false, "print only the chat template")
	c.Flags().BoolVar(&license, "license", false, "print only the license")
	return c
}

// describe writes ollama show's sections, then pinfer's own: how the file
// runs. A file no built-in graph binds is still described, with the reason.
func describe(w io.Writer, f *gguf.File, m *engine.Model, bindErr error) {
	arch := f.Arch()
	row := func(k string, v any) { fmt.Fprintf(w, "    %-24s%v\n", k, v) }
	fmt.Fprintln(w, "  Model")
	row("architecture", arch)
	row("parameters", gguf.HumanCount(f.ParamCount()))
	for _, k := range []struct{ name, key string }{{"context length", "context_length"}, {"embedding length", "embedding_length"}, {"feed-forward length", "feed_forward_length"}, {"block count", "block_count"}} {
		if v, ok := f.KV(arch + "." + k.key); ok {
			row(k.name, v.V)
		}
	}
	if typ, ok := f.WeightType(); ok {
		row("quantization", strings.ToUpper(typ.String()))
	}
	if st, err := os.Stat(f.Path); err == nil {
		row("file size", sizeText(st.Size()))
	}
	fmt.Fprintln(w)

	fmt.Fprintln(w, "  Sparsity")
	if bindErr != nil {
		row("graph", "none: "+bindErr.Error())
	} else {
		row("graph", fmt.Sprintf("%s (%s)", m.Spec.Name, m.Spec.File))
		sparse(row, f, m)
	}
	fmt.Fprintln(w)

	fmt.Fprintln(w, "  Capabilities")
	fmt.Fprintln(w, "    completion")
	fmt.Fprintln(w, "    embedding") // the server pools the final norm's output for any model
	if f.Has("tokenizer.chat_template") {
		fmt.Fprintln(w, "    chat")
	}
	if s, err := f.String("general.license"); err == nil {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "  License")
		for _, l := range firstLines(s, 2) {
			fmt.Fprintln(w, "    "+l)
		}
	}
	fmt.Fprintln(w)
}

// sparse writes the sparse FFNs' rows: how many, their activation, their
// predictor and the layout of their down rows.
func sparse(row func(string, any), f *gguf.File, m *engine.Model) {
	layers := m.Prog.Layers
	if len(layers) == 0 {
		row("sparse FFNs", "none: every FFN runs dense")
		return
	}
	l := layers[0]
	row("sparse FFNs", fmt.Sprintf("%d, %d neurons each", len(layers), l.NFF))
	act := l.Act
	if l.Threshold != 0 {
		act += fmt.Sprintf(" (fires above %g)", l.Threshold)
	}
	row("activation", act)
	if m.HasPredictor() {
		// fc1 maps n_embd to the predictor's rank (rows, neuron-major).
		rank := l.FC1.Rows
		if rank == l.NEmbd {
			rank = l.FC1.Cols
		}
		p := fmt.Sprintf("mlp (fc1/fc2 of rank %d, %s), run's default", rank, strings.ToUpper(l.FC1.Type.String()))
		if l.PredCut != 0 {
			p += fmt.Sprintf("; skips scores at or below %g", l.PredCut)
		}
		row("predictor", p)
	} else {
		row("predictor", "none in the file: runs dense unless --predictor names one (oracle, static, a plugin)")
	}
	down := "ffn_down (the axpy reads its columns)"
	for _, t := range f.Tensors {
		if strings.HasSuffix(t.Name, "ffn_down_t.weight") {
			down = "ffn_down_t (PowerInfer's transposed rows)"
			break
		}
	}
	row("down rows", down)
}

func firstLines(s string, n int) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l = strings.TrimSpace(l); l != "" && len(out) < n {
			out = append(out, l)
		}
	}
	return out
}

// dump lists the metadata (long arrays by their length and first items)
// and the tensors, as gguf-dump does.
func dump(w io.Writer, f *gguf.File) {
	fmt.Fprintf(w, "  Metadata (GGUF v%d, %d keys)\n", f.Version, len(f.KVs))
	kvs := append([]gguf.KV(nil), f.KVs...)
	sort.SliceStable(kvs, func(i, j int) bool { return kvs[i].Key < kvs[j].Key })
	for _, kv := range kvs {
		fmt.Fprintf(w, "    %-40s %s\n", kv.Key, brief(kv.Value))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  Tensors (%d)\n", len(f.Tensors))
	for _, t := range f.Tensors {
		dims := make([]string, len(t.Dims))
		for i, d := range t.Dims {
			dims[i] = fmt.Sprint(d)
		}
		fmt.Fprintf(w, "    %-40s %-6s [%s]\n", t.Name, strings.ToUpper(t.Type.String()), strings.Join(dims, ", "))
	}
}

// brief is a value on one line: an array as its length and first items, a
// string quoted and cut.
func brief(v gguf.Value) string {
	if rv := reflect.ValueOf(v.V); rv.Kind() == reflect.Slice && rv.Type().Elem().Kind() != reflect.Uint8 {
		var items []string
		for i := range min(rv.Len(), 3) {
			e := rv.Index(i).Interface()
			if ev, ok := e.(gguf.Value); ok {
				items = append(items, brief(ev))
			} else {
				items = append(items, brief(gguf.Value{V: e}))
			}
		}
		if rv.Len() > 3 {
			items = append(items, "...")
		}
		return fmt.Sprintf("[%d]: [%s]", rv.Len(), strings.Join(items, ", "))
	}
	if s, ok := v.V.(string); ok {
		if r := []rune(s); len(r) > 60 {
			s = string(r[:60]) + "..."
		}
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprint(v.V)
}
