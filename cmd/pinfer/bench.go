package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/pinfer/pinfer/bench"
	"github.com/pinfer/pinfer/engine"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

func benchCmd() *cobra.Command {
	var mf modelFlags
	var g gpuFlags
	var o bench.Options
	var a benchArgs
	var format string
	var files []string
	var progress bool
	c := &cobra.Command{
		Use:   "bench -m FILE [-m FILE...]",
		Short: "Measure prefill and decode speed, dense against sparse in one run (llama-bench style)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Each mode names its own predictor: one --predictor for all
			// of them would be silently ignored.
			if mf.predictor != "" {
				return fmt.Errorf("bench: --predictor %q: bench takes predictors as modes: --mode dense,%s", mf.predictor, mf.predictor)
			}
			if !slices.Contains(benchFormats, format) {
				return fmt.Errorf("bench: -o %q: want one of %s", format, strings.Join(benchFormats, ", "))
			}
			if err := a.parse(&o, mf.kvType); err != nil {
				return err
			}
			mf.kvType = o.KVTypes[0].String()  // load takes one; Run sets each in turn
			mf.threads = slices.Max(o.Threads) // a hybrid mode's CPU side
			// The device hook checks the GPU flags before any model loads:
			// a build without CUDA refuses them, as run does, rather than
			// measuring the CPU alone. A CPU mode asks nothing of the model.
			if _, _, err := benchGPU(nil, &mf, &g)("dense"); err != nil {
				return fmt.Errorf("bench: %v", err)
			}
			if len(files) == 0 {
				files = []string{""} // the built-in model
			}
			var reps []*bench.Report
			for _, file := range files {
				mf.model = file
				rep, err := benchOne(&mf, &g, o, !cmd.Flags().Changed("mode"), progress)
				if err != nil {
					return err
				}
				reps = append(reps, rep)
			}
			return printReports(os.Stdout, format, reps)
		},
	}
	mf.addModel(c, &files)
	c.Flags().MarkHidden("predictor") // --mode names them
	g.add(c)
	fl := c.Flags()
	fl.Lookup("kv-type").Usage += "; a comma-separated list runs every test at each (llama-bench's -ctk)"
	fl.StringVarP(&a.prompts, "n-prompt", "p", "64", "prompt tokens of the prefill test; a comma-separated list runs one test each, as llama-bench (0: none)")
	fl.StringVarP(&a.gens, "n-gen", "n", "16", "tokens of the decode test; a list runs one test each (0: none)")
	fl.StringVarP(&a.depths, "n-depth", "d", "0", "tokens already in the context when each test starts (prefilled, not timed), as llama-bench's -d; a list runs every test at each")
	fl.StringVarP(&a.threads, "threads", "t", strconv.Itoa(runtime.NumCPU()), "CPU threads; a list runs every test at each")
	fl.StringArrayVar(&a.pgs, "pg", nil, "P,G: a prompt of P tokens and G decode steps timed together (llama-bench's -pg); repeat for more")
	fl.BoolVar(&o.OpTimes, "op-times", false, "also time each op of the graph: a table of where each test's tokens went (calls, ms and share per token, and the rate of each op's weight reads in decode)")
	fl.BoolVar(&progress, "progress", false, "show on stderr which test runs, and how many runs are left (llama-bench's --progress)")
	fl.IntVarP(&o.Reps, "repetitions", "r", 5, "repetitions of each test")
	fl.StringVar(&a.modes, "mode", "dense,sparse", "comma-separated: dense, sparse (the file's predictor), split (llama.cpp's -ngl layer split on the GPU, dense), hybrid (hot neurons on the GPU, the file's predictor), or a predictor name; if not given and the file has no predictor, dense alone")
	fl.StringVarP(&format, "output", "o", "md", "md, json (one object; an array of them for several -m), jsonl (a line a result) or csv, as llama-bench's -o")
	return c
}

var benchFormats = []string{"md", "json", "jsonl", "csv"}

// benchArgs are bench's flags that hold lists, as given.
type benchArgs struct {
	prompts, gens, depths, threads, modes string
	pgs                                   []string
}

// parse sets o's lists from the flags (and the KV types from kv, the
// --kv-type flag, which bench reads as a list), each item checked.
func (a *benchArgs) parse(o *bench.Options, kv string) error {
	for _, l := range []struct {
		flag, s string
		v       *[]int
	}{{"-p", a.prompts, &o.Prompts}, {"-n", a.gens, &o.Gens}, {"-d", a.depths, &o.Depths}, {"-t", a.threads, &o.Threads}} {
		v, err := intList("bench: "+l.flag, l.s)
		if err != nil {
			return err
		}
		*l.v = v
	}
	for _, s := range a.pgs {
		v, err := intList("bench: --pg", s)
		if err != nil {
			return err
		}
		if len(v) != 2 {
			return fmt.Errorf("bench: --pg %q: want two counts, prompt and decode tokens, e.g. 512,128", s)
		}
		o.PG = append(o.PG, [2]int{v[0], v[1]})
	}
	if err := o.Check(); err != nil {
		return err
	}
	o.Modes = strings.Split(a.modes, ",")
	for _, mode := range o.Modes {
		if strings.TrimSpace(mode) == "" {
			return fmt.Errorf("bench: --mode %q: a mode is empty", a.modes)
		}
	}
	kvs, err := listItems("bench: --kv-type", kv)
	if err != nil {
		return err
	}
	for _, k := range kvs {
		t, err := engine.ParseKVType(k)
		if err != nil {
			return fmt.Errorf("bench: %v", err)
		}
		o.KVTypes = append(o.KVTypes, t)
	}
	return nil
}

// benchOne loads the model that mf names and measures it. Where the modes
// were not given and the file has no predictor (the built-in model), dense
// runs alone, as llama-bench runs with no arguments.
func benchOne(mf *modelFlags, g *gpuFlags, o bench.Options, defaultModes, progress bool) (*bench.Report, error) {
	m, err := mf.load()
	if err != nil {
		return nil, err
	}
	defer m.Close()
	if defaultModes && !m.HasPredictor() {
		o.Modes = []string{"dense"}
		fmt.Fprintf(os.Stderr, "bench: %s carries no predictor (fc1/fc2), so only dense runs; name one to compare, e.g. --mode dense,oracle\n", m.File.Path)
	}
	if g.budget > 0 {
		o.Device = benchGPU(m, mf, g)
	}
	if progress {
		bar := progressbar.NewOptions(o.Runs(),
			progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionShowCount(),
			progressbar.OptionSetWidth(30),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(os.Stderr) }))
		started := 0
		o.Progress = func(what string) {
			bar.Describe(filepath.Base(m.File.Path) + " " + what)
			bar.Set(started) // the runs done, not counting this one
			started++
		}
		defer bar.Finish()
	}
	return bench.Run(m, o)
}

// printReports writes the reports (one a model) to w in format: md, json,
// jsonl or csv. json is one object for one model, an array for several.
// Each line of jsonl and csv is a whole record, the report's head repeated,
// as llama-bench writes them, so that lines from several runs can be joined.
func printReports(w io.Writer, format string, reps []*bench.Report) error {
	type record struct {
		bench.Head
		bench.Result
	}
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if len(reps) == 1 {
			return enc.Encode(reps[0])
		}
		return enc.Encode(reps)
	case "jsonl":
		enc := json.NewEncoder(w)
		for _, rep := range reps {
			for _, r := range rep.Results {
				if err := enc.Encode(record{rep.Head, r}); err != nil {
					return err
				}
			}
		}
		return nil
	case "csv":
		cw := csv.NewWriter(w)
		var head, row []string
		csvFields(reflect.ValueOf(record{}), &head, &row)
		if err := cw.Write(head); err != nil {
			return err
		}
		for _, rep := range reps {
			for _, r := range rep.Results {
				head, row = head[:0], row[:0]
				csvFields(reflect.ValueOf(record{rep.Head, r}), &head, &row)
				if err := cw.Write(row); err != nil {
					return err
				}
			}
		}
		cw.Flush()
		return cw.Error()
	}
	printTable(w, reps)
	return nil
}

// csvFields appends the JSON name and value of each field of the struct v,
// embedded structs' fields in their place, so that csv has jsonl's columns
// in its order. A list (a test's samples) is one cell, space-separated.
func csvFields(v reflect.Value, names, vals *[]string) {
	t := v.Type()
	for i := range t.NumField() {
		f, fv := t.Field(i), v.Field(i)
		if f.Anonymous {
			csvFields(fv, names, vals)
			continue
		}
		if fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.Struct {
			continue // a table of its own (op_times): json and jsonl carry it
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		cell := csvCell(fv)
		if fv.Kind() == reflect.Slice {
			parts := make([]string, fv.Len())
			for k := range parts {
				parts[k] = csvCell(fv.Index(k))
			}
			cell = strings.Join(parts, " ")
		}
		*names, *vals = append(*names, name), append(*vals, cell)
	}
}

// csvCell writes a number as a spreadsheet reads it: 1040384, not Go's
// 1.040384e+06.
func csvCell(v reflect.Value) string {
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'f', -1, v.Type().Bits())
	}
	return fmt.Sprint(v.Interface())
}

// printTable writes llama-bench's table, every model's lines in one, then
// what each report says below it (its model's name first when several).
func printTable(w io.Writer, reps []*bench.Report) {
	fmt.Fprintf(w, "| model | size | params | backend | threads | mode | test | t/s | median | bytes/token | GB/s (%% of stream GB/s) | bound t/s |\n")
	fmt.Fprintf(w, "| --- | ---: | ---: | --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range reps {
		printRows(w, r)
	}
	fmt.Fprintf(w, "\nGB/s: decode's weight reads per second at the median; (%% of stream): median over repetitions of that repetition's reads against a streaming read measured around it (mean of just before and just after; each the faster of one run per thread and four side by side); bound t/s: the decode speed that stream allows at those bytes per token\n")
	for _, r := range reps {
		who := ""
		if len(reps) > 1 {
			who = filepath.Base(r.Model) + ": "
		}
		if r.HugePages >= 0 {
			fmt.Fprintf(w, "%sweights in 2 MB pages: %.0f%% of those read (a file cached through a plain read or write keeps 4 KB pages until it leaves the page cache)\n", who, 100*r.HugePages)
		}
		for _, x := range r.Results {
			if x.Placed != "" && x.Gen > 0 {
				fmt.Fprintf(w, "%s%s: %s\n", who, x.Mode, x.Placed)
			}
		}
		for _, l := range ratios(r.Results) {
			fmt.Fprintln(w, who+l)
		}
	}
	printOpTimes(w, reps)
}

// printOpTimes writes, where the lines were timed op by op (--op-times),
// a table of each line's ops, the slowest first.
func printOpTimes(w io.Writer, reps []*bench.Report) {
	head := false
	for _, r := range reps {
		for _, x := range r.Results {
			for _, o := range x.Ops {
				if !head {
					fmt.Fprintf(w, "\n| model | mode | test | threads | op | calls/token | ms/token | share | weights/token | GB/s |\n| --- | --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |\n")
					head = true
				}
				bytes, gbs := "", ""
				if o.Bytes > 0 {
					bytes, gbs = decimalBytes(o.Bytes), fmt.Sprintf("%.1f", o.GBPerSec)
				}
				fmt.Fprintf(w, "| %s | %s | %s | %d | %s | %.3g | %.3f | %.1f%% | %s | %s |\n",
					filepath.Base(r.Model), x.Mode, x.Test, x.Threads, o.Op, o.Calls, o.Ms, 100*o.Share, bytes, gbs)
			}
		}
	}
}

// printRows writes a report's lines of the table.
func printRows(w io.Writer, r *bench.Report) {
	name := filepath.Base(r.Model)
	for _, x := range r.Results {
		bpt, gbs, bound, backend := "", "", "", r.Backend
		if r.Repacked > 0 {
			backend += ", q4_0 repacked"
		}
		if x.KVType != "f32" {
			backend += ", KV " + x.KVType // as llama-bench shows a non-default type_k
		}
		if x.BytesPerToken > 0 {
			bpt = fmt.Sprintf("%.2f GB", x.BytesPerToken/1e9)
			gbs = fmt.Sprintf("%.1f (%.0f%% of %.1f)", x.GBPerSec, 100*x.OfStream, x.StreamGBps)
		}
		if x.BoundTPS > 0 {
			bound = fmt.Sprintf("%.2f", x.BoundTPS)
		}
		if x.Placed != "" {
			// Part of the reads come from GPU memory: the CPU's streaming
			// read is no ceiling for them. (A mode that hands the step to
			// the device executor leaves no program to count bytes in.)
			backend += " + CUDA"
			if x.BytesPerToken > 0 {
				gbs = fmt.Sprintf("%.1f", x.GBPerSec)
			}
			bound = ""
		}
		mode := x.Mode
		if x.Predictor != x.Mode {
			mode += " (" + x.Predictor + ")"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %d | %s | %s | %.2f ± %.2f | %.2f | %s | %s | %s |\n",
			name, sizeText(r.SizeBytes), paramsText(r.Params), backend, x.Threads, mode, x.Test, x.Mean, x.SD, x.Median, bpt, gbs, bound)
	}
}

// ratios are the table's closing lines: sparse against dense decode (and
// the GPU modes' pairs) on the same test and threads, and each mode's
// prefill against its decode per token at the same threads and depth. With
// one prefill and one decode test at one thread count they read as they
// always have; with lists, each line names its tests.
func ratios(rs []bench.Result) []string {
	threads, kvs, pps, tgs := map[int]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	var modes []string
	pp := func(x bench.Result) bool { return x.Gen == 0 }
	tg := func(x bench.Result) bool { return x.Gen > 0 && x.Prompt == 0 } // not a --pg test
	for _, x := range rs {
		threads[x.Threads], kvs[x.KVType] = true, true
		if tg(x) {
			tgs[x.Test] = true
		} else if pp(x) {
			pps[x.Test] = true
		}
		if !slices.Contains(modes, x.Mode) {
			modes = append(modes, x.Mode)
		}
	}
	many := len(threads) > 1 || len(kvs) > 1 || len(pps) > 1 || len(tgs) > 1
	// at names a pair's threads, and its KV type when the run had several.
	at := func(x bench.Result) string {
		s := ", " + nThreads(x.Threads)
		if len(kvs) > 1 {
			s += ", KV " + x.KVType
		}
		return s
	}
	same := func(a, b bench.Result) bool { return a.Threads == b.Threads && a.KVType == b.KVType }
	var out []string
	for _, q := range [][2]string{{"sparse", "dense"}, {"hybrid", "split"}, {"hybrid", "sparse"}} {
		for _, a := range rs {
			for _, b := range rs {
				if a.Mode == q[0] && b.Mode == q[1] && tg(a) && a.Test == b.Test && same(a, b) && a.Median > 0 && b.Median > 0 {
					label := ""
					if many {
						label = ", " + a.Test + at(a)
					}
					out = append(out, fmt.Sprintf("%s / %s decode (medians%s): %.2fx", q[0], q[1], label, a.Median/b.Median))
				}
			}
		}
	}
	for _, m := range modes {
		for _, a := range rs {
			for _, b := range rs {
				if a.Mode != m || b.Mode != m || !pp(a) || !tg(b) || !same(a, b) || a.Depth != b.Depth || a.Median <= 0 || b.Median <= 0 {
					continue
				}
				label := ""
				if many {
					label = fmt.Sprintf(", %s against %s%s", a.Test, b.Test, at(a))
				}
				out = append(out, fmt.Sprintf("%s prefill / decode per token (medians%s): %.2fx", m, label, a.Median/b.Median))
			}
		}
	}
	return out
}

// decimalBytes writes b in kB, MB or GB, as the table's GB/s are decimal.
func decimalBytes(b float64) string {
	switch {
	case b >= 1e9:
		return fmt.Sprintf("%.2f GB", b/1e9)
	case b >= 1e6:
		return fmt.Sprintf("%.1f MB", b/1e6)
	}
	return fmt.Sprintf("%.1f kB", b/1e3)
}

func nThreads(n int) string {
	if n == 1 {
		return "1 thread"
	}
	return fmt.Sprintf("%d threads", n)
}

// sizeText and paramsText write a model's size as llama-bench does: GiB
// and billions, or MiB and millions below one.
func sizeText(b int64) string {
	if b < 1<<30 {
		return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20))
	}
	return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
}

func paramsText(n int64) string {
	if n < 1e9 {
		return fmt.Sprintf("%.2f M", float64(n)/1e6)
	}
	return fmt.Sprintf("%.2f B", float64(n)/1e9)
}
