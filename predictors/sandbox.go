package predictors

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/traefik/yaegi/interp"
	"github.com/traefik/yaegi/stdlib"
)

// hostPath is the import path plugins use for the host API.
const hostPath = "pinfer/host"

// allowedStd are the standard packages a plugin may import: pure
// computation, with no access to files, processes, the network, memory or
// the runtime. fmt prints to stderr only (see compile). slices and maps are
// left out: yaegi has no native generics, so it interprets their source,
// which lacks slices.Sort and its kin and fails on most of the rest
// (slices.Reverse, maps.Clone: "undefined type for E" at a line of that
// source); sort and host.Union do what plugins need.
var allowedStd = []string{
	"cmp", "container/heap", "container/list", "errors", "fmt",
	"math", "math/bits", "math/rand", "sort", "strconv", "strings",
	"unicode", "unicode/utf8",
}

// hostExports maps the script-visible names of "pinfer/host" to the
// natives in hostapi.go.
func hostExports() interp.Exports {
	return interp.Exports{hostPath + "/host": {
		"Layer":  reflect.ValueOf((*hostLayer)(nil)),
		"Input":  reflect.ValueOf((*hostInput)(nil)),
		"Matrix": reflect.ValueOf((*hostMatrix)(nil)),
		"Vec":    reflect.ValueOf((*vec)(nil)),

		"MLPScores":  reflect.ValueOf(hostMLPScores),
		"GateScores": reflect.ValueOf(hostGateScores),
		"GateAt":     reflect.ValueOf(hostGateAt),
		"Fired":      reflect.ValueOf(hostFired),
		"MatVec":     reflect.ValueOf(hostMatVec),
		"DotRows":    reflect.ValueOf(hostDotRows),
		"ReLU":       reflect.ValueOf(hostReLU),
		"Add":        reflect.ValueOf(hostAdd),
		"Axpy":       reflect.ValueOf(hostAxpy),
		"Scale":      reflect.ValueOf(hostScale),
		"Mul":        reflect.ValueOf(hostMul),
		"Fill":       reflect.ValueOf(hostFill),
		"Sigmoid":    reflect.ValueOf(hostSigmoid),
		"Dot":        reflect.ValueOf(hostDot),
		"Sum":        reflect.ValueOf(hostSum),
		"AddAt":      reflect.ValueOf(hostAddAt),
		"TopK":       reflect.ValueOf(hostTopK),
		"Above":      reflect.ValueOf(hostAbove),
		"Union":      reflect.ValueOf(hostUnion),
		"Recall":     reflect.ValueOf(hostRecall),
		"NewVec":     reflect.ValueOf(hostNewVec),
	}}
}

// stdExports is yaegi's stdlib table cut down to allowedStd.
func stdExports() interp.Exports {
	out := interp.Exports{}
	for key, syms := range stdlib.Symbols {
		// "." holds the interface wrappers that let sort.Sort and friends
		// take a script's own types.
		if key == "." || slices.Contains(allowedStd, path.Dir(key)) {
			out[key] = syms
		}
	}
	return out
}

// checkSource parses a plugin and refuses what the sandbox does not allow,
// before yaegi sees it: imports outside the whitelist (so also unsafe,
// syscall, os, C) and goroutines and channels, which would outlive a call's
// time budget. It returns the package name.
func checkSource(file string, src []byte) (string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.SkipObjectResolution)
	if err != nil {
		return "", oneLine(err)
	}
	where := func(p token.Pos) string {
		pos := fset.Position(p)
		return fmt.Sprintf("%s:%d", pos.Filename, pos.Line)
	}
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		if p != hostPath && !slices.Contains(allowedStd, p) {
			return "", fmt.Errorf("%s: import %q is not allowed in a plugin (allowed: %s and %s)",
				where(im.Pos()), p, hostPath, strings.Join(allowedStd, ", "))
		}
	}
	var bad error
	ast.Inspect(f, func(n ast.Node) bool {
		if bad != nil {
			return false
		}
		switch n := n.(type) {
		case *ast.GoStmt:
			bad = fmt.Errorf("%s: a plugin may not start goroutines", where(n.Pos()))
		case *ast.ChanType, *ast.SendStmt, *ast.SelectStmt:
			bad = fmt.Errorf("%s: a plugin may not use channels", where(n.Pos()))
		case *ast.UnaryExpr:
			if n.Op == token.ARROW {
				bad = fmt.Errorf("%s: a plugin may not use channels", where(n.Pos()))
			}
		case *ast.FuncDecl:
			if n.Recv == nil && n.Name.Name == "main" {
				bad = fmt.Errorf("%s: a plugin has no main function; it defines Predict", where(n.Pos()))
			}
		}
		return true
	})
	return f.Name.Name, bad
}

// oneLine keeps the first of a parser's error list, which go/scanner
// already prefixes with file:line:col.
func oneLine(err error) error {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return fmt.Errorf("%s", s)
}
