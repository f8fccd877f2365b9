package predictors

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/traefik/yaegi/interp"
)

// PluginOptions tunes LoadPluginWith; zero values take the defaults.
type PluginOptions struct {
	Budget     time.Duration    // per Predict call; default 50ms
	InitBudget time.Duration    // for loading the file and running Init; default 1s
	Log        func(msg string) // one line per failure; default: stderr
}

// LoadPlugin loads a predictor written as a Go source file and interpreted
// by yaegi; see plugins/README.md for the contract and the host API.
func LoadPlugin(path string, layers []*Layer) (Predictor, error) {
	return LoadPluginWith(path, layers, PluginOptions{})
}

// LoadPluginWith is LoadPlugin with options. A file that does not parse,
// imports what the sandbox refuses, fails to compile, lacks Predict, or
// whose Init fails is an error here. Later failures are reported once per
// layer through opt.Log, and that layer runs dense from then on.
func LoadPluginWith(path string, layers []*Layer, opt PluginOptions) (Predictor, error) {
	if opt.Budget <= 0 {
		opt.Budget = 50 * time.Millisecond
	}
	if opt.InitBudget <= 0 {
		opt.InitBudget = time.Second
	}
	if opt.Log == nil {
		opt.Log = func(msg string) { fmt.Fprintln(os.Stderr, msg) }
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pkg, err := checkSource(path, src)
	if err != nil {
		return nil, err
	}
	p := &plugin{path: path, pkg: pkg, src: src, opt: opt, states: map[*Layer]*layerState{}}
	for _, l := range layers {
		s := newLayerState(l)
		p.states[l] = s
		p.order = append(p.order, s.handle())
	}
	p.watch = time.AfterFunc(time.Hour, p.bark)
	p.watch.Stop()
	if _, err := p.compile(); err != nil {
		return nil, err
	}
	return p, nil
}

// plugin runs a script's Predict under a watchdog (see bark). Calls run
// inline on the caller's goroutine: a call that overruns its budget is
// stopped by yaegi's cancellation, which ends interpreted code at its next
// step, so no goroutine is left spinning. Only interpreted code can run long: the host
// API and the whitelisted packages are bounded, and the script cannot start
// goroutines or block on channels.
type plugin struct {
	path, pkg string
	src       []byte
	opt       PluginOptions
	states    map[*Layer]*layerState
	order     []hostLayer // the layers given at load, for Init

	mu     sync.Mutex // the executor calls Predict from one goroutine; this makes sharing safe
	broken bool       // the script cannot be reloaded: every layer runs dense

	watch   *time.Timer
	wmu     sync.Mutex // what the watchdog shares with the call
	running bool
	overran bool
	marked  bool          // cpuMark is set: the call has run a budget
	cpuMark time.Duration // processCPU at the last bark
	budget  time.Duration
	vm      *vm
	site    panicSite
}

// vm is one interpreter loaded with the script. A stopped interpreter
// returns zero values from every later call, so it is replaced.
type vm struct {
	i       *interp.Interpreter
	predict func(hostLayer, hostInput) []int32
}

func (p *plugin) Name() string { return p.path }

func (p *plugin) Predict(l *Layer, in Input, dst []int32) []int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.states[l]
	if s == nil { // a layer not given at load: Init never saw it, Predict may
		s = newLayerState(l)
		p.states[l] = s
	}
	if s.failed || p.broken {
		return nil
	}
	s.in = in
	var ids []int32
	err := p.guard(p.opt.Budget, func() { ids = p.vm.predict(s.handle(), hostInput{s}) })
	s.in = Input{} // the executor's buffers are not the script's to keep
	if err == nil {
		if ids == nil {
			return nil
		}
		if dst, err = accept(l, ids, dst); err == nil {
			return dst
		}
	}
	p.fail(s, err)
	return nil
}

// accept copies a script's ids into dst, sorted and without duplicates; an
// id out of range is an error, never clamped.
func accept(l *Layer, ids, dst []int32) ([]int32, error) {
	n := int32(l.NFF)
	sorted := true
	for i, id := range ids {
		if id < 0 || id >= n {
			return nil, fmt.Errorf("Predict returned neuron %d, out of range [0,%d)", id, n)
		}
		sorted = sorted && (i == 0 || id > ids[i-1])
	}
	dst = append(some(dst), ids...) // an empty answer stays "no neuron", not nil's "all"
	if !sorted {
		slices.Sort(dst)
		dst = slices.Compact(dst)
	}
	return dst, nil
}

// fail reports a layer's failure once and turns the layer dense. After an
// overrun the interpreter was stopped, so the script is loaded afresh for
// the other layers: its global state starts over.
func (p *plugin) fail(s *layerState, err error) {
	s.failed = true
	where := fmt.Sprintf("layer %d", s.l.Index)
	if slices.ContainsFunc(p.order, func(l hostLayer) bool { return l.Expert > 0 }) {
		where += fmt.Sprintf(" expert %d", s.l.Expert) // a mixture's experts share the index
	}
	p.opt.Log(fmt.Sprintf("plugin %s: %s: %v; the FFN runs dense from now on", p.path, where, err))
	if _, over := err.(overrun); !over {
		return
	}
	if _, err := p.compile(); err != nil {
		p.broken = true
		p.opt.Log(fmt.Sprintf("plugin %s: reloading after the overrun: %v; every layer runs dense from now on", p.path, err))
	}
}

type overrun time.Duration

func (o overrun) Error() string {
	return fmt.Sprintf("overran its time budget of %v and was stopped", time.Duration(o))
}

// guard runs f under the watchdog and turns a panic or an overrun into an
// error.
func (p *plugin) guard(budget time.Duration, f func()) (err error) {
	p.wmu.Lock()
	p.running, p.overran, p.marked, p.budget = true, false, false, budget
	p.wmu.Unlock()
	p.site.reset()
	p.watch.Reset(budget)
	defer func() {
		r := recover()
		p.watch.Stop()
		p.wmu.Lock()
		over := p.overran
		p.running, p.overran = false, false
		p.wmu.Unlock()
		switch {
		case over:
			err = overrun(budget)
		case r != nil:
			msg := fmt.Sprint(r)
			if i := strings.IndexByte(msg, '\n'); i >= 0 {
				msg = msg[:i]
			}
			if at := p.site.get(); at != "" {
				msg += " (in " + at + ")"
			}
			err = fmt.Errorf("panic: %s", msg)
		}
	}()
	f()
	return nil
}

// bark is the watchdog. A call overruns when it is still running a budget
// after it started and the process then stays busy (a quarter of the time
// or more) for one more budget: on a loaded machine a call that merely
// waits for a CPU is not the script's fault. Once it has stopped the
// interpreter it checks again a budget later, should the stop not have
// taken.
func (p *plugin) bark() {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if !p.running || p.vm == nil {
		return
	}
	now := processCPU()
	busy := p.marked && now-p.cpuMark >= p.budget/4
	p.marked, p.cpuMark = true, now
	p.watch.Reset(p.budget)
	if !busy && !p.overran {
		return
	}
	p.overran = true
	// yaegi stops an interpreter only through a context: evaluate a
	// constant under one already cancelled.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p.vm.i.EvalWithContext(ctx, "0")
}

// compile makes an interpreter that holds the host API and the whitelist
// only, loads the script into it and runs its Init, all under the init
// budget. It becomes p.vm even when it fails (then unused).
func (p *plugin) compile() (*vm, error) {
	i := interp.New(interp.Options{
		Stdin:                strings.NewReader(""),
		Stdout:               os.Stderr, // never the program's output
		Stderr:               &p.site,   // yaegi's panic trace: where the panic began
		Args:                 []string{p.path},
		Env:                  []string{},
		SourcecodeFilesystem: oneFile{p.path, p.src},
	})
	if err := i.Use(stdExports()); err != nil {
		return nil, fmt.Errorf("%s: loading the standard packages: %v", p.path, err)
	}
	if err := i.Use(hostExports()); err != nil {
		return nil, fmt.Errorf("%s: loading the host API: %v", p.path, err)
	}
	v := &vm{i: i}
	p.wmu.Lock()
	p.vm = v // the watchdog stops this one during the load
	p.wmu.Unlock()

	var loadErr error
	var predict, init reflect.Value
	err := p.guard(p.opt.InitBudget, func() {
		if _, loadErr = i.EvalPath(p.path); loadErr != nil {
			return
		}
		predict, loadErr = i.Eval(p.qualify("Predict"))
		if loadErr != nil {
			loadErr = fmt.Errorf("no func Predict(l host.Layer, in host.Input) []int32")
			return
		}
		init, _ = i.Eval(p.qualify("Init"))
	})
	if err == nil {
		err = loadErr
	}
	if err != nil {
		return nil, p.where(err)
	}
	var ok bool
	if v.predict, ok = predict.Interface().(func(hostLayer, hostInput) []int32); !ok {
		return nil, fmt.Errorf("%s: Predict is %s, want func(l host.Layer, in host.Input) []int32", p.path, hostNames(predict.Type()))
	}
	if init.IsValid() {
		f, ok := init.Interface().(func([]hostLayer))
		if !ok {
			return nil, fmt.Errorf("%s: Init is %s, want func(layers []host.Layer)", p.path, hostNames(init.Type()))
		}
		if err := p.guard(p.opt.InitBudget, func() { f(p.order) }); err != nil {
			return nil, fmt.Errorf("%s: Init: %v", p.path, err)
		}
	}
	return v, nil
}

// qualify names a symbol of the script's package as Eval wants it.
func (p *plugin) qualify(name string) string {
	if p.pkg == "main" {
		return name
	}
	return p.pkg + "." + name
}

// where makes an error one line that starts with the file (yaegi's compile
// errors already give file:line:col).
func (p *plugin) where(err error) error {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if !strings.HasPrefix(s, p.path) {
		s = p.path + ": " + s
	}
	return fmt.Errorf("%s", s)
}

// hostNames prints a type the way the script spells it.
func hostNames(t reflect.Type) string {
	return strings.NewReplacer("predictors.hostLayer", "host.Layer", "predictors.hostInput", "host.Input",
		"predictors.hostMatrix", "host.Matrix", "predictors.vec", "host.Vec").Replace(t.String())
}

// panicSite keeps the function in which a call's panic began: yaegi writes
// one "file:line:col: panic: pkg.Func(...)" line per frame it unwinds,
// innermost first.
type panicSite struct {
	mu sync.Mutex
	at string
}

func (s *panicSite) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// The position yaegi gives is not the panicking statement's, so keep
	// the function's name only.
	line := strings.TrimSpace(string(b))
	if i := strings.Index(line, ": panic: "); i > 0 && s.at == "" {
		s.at = strings.TrimSuffix(line[i+len(": panic: "):], "(...)")
	}
	return len(b), nil
}

func (s *panicSite) reset() { s.mu.Lock(); s.at = ""; s.mu.Unlock() }

func (s *panicSite) get() string { s.mu.Lock(); defer s.mu.Unlock(); return s.at }

// oneFile is the interpreter's whole source filesystem: the script itself,
// so yaegi can never load other source from disk.
type oneFile struct {
	name string
	data []byte
}

func (o oneFile) Open(name string) (fs.File, error) {
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

func (o oneFile) ReadFile(name string) ([]byte, error) {
	if name != o.name {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return o.data, nil
}

func (o oneFile) Stat(name string) (fs.FileInfo, error) {
	if name != o.name {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	return fileInfo{o}, nil
}

type fileInfo struct{ o oneFile }

func (f fileInfo) Name() string       { return f.o.name }
func (f fileInfo) Size() int64        { return int64(len(f.o.data)) }
func (f fileInfo) Mode() fs.FileMode  { return 0o444 }
func (f fileInfo) ModTime() time.Time { return time.Time{} }
func (f fileInfo) IsDir() bool        { return false }
func (f fileInfo) Sys() any           { return nil }
