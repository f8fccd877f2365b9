// Package server serves a model over OpenAI's HTTP API: chat and text
// completions (streamed by server-sent events), tokenize/detokenize, health
// and Prometheus metrics. One scheduler goroutine owns the model and decodes
// all busy slots in one batch per step (continuous batching).
package server

import (
	"crypto/subtle"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/graph"
	"github.com/pinfer/pinfer/models"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/predictors"
)

// Config sets up a Server; zero fields take the defaults noted.
type Config struct {
	Slots            int    // requests decoded together (-np); 0: 1
	Ctx              int    // context of each slot; 0: the model's, at most 4096
	Threads          int    // 0: all cores
	APIKey           string // when set, every endpoint but /health needs "Authorization: Bearer KEY"
	ModelName        string // the id in /v1/models; "": the file name without .gguf
	DefaultMaxTokens int    // when a request sets none; 0: until the context is full
	MaxBodyBytes     int64  // 0: 4 MiB
	ChatTemplate     string // used instead of the file's tokenizer.chat_template when set
	Pooling          string // embeddings' pooling (--pooling): PoolingMean (""), PoolingLast or PoolingCLS
	// ContextShift lets a request whose max_tokens runs past its slot's
	// context go on, as llama-server's --context-shift: the prompt's
	// first n_keep tokens stay and the older half of the rest is dropped.
	ContextShift bool
	// SlotSavePath, when set, is the directory of the slot files that
	// POST /slots/{id}?action=save|restore writes and reads (llama-server's
	// --slot-save-path); without it those actions get a 501.
	SlotSavePath string
	// Prepare, if set, configures the scheduler's runner once (a sparse
	// predictor, say) before any request runs.
	Prepare func(*graph.Runner) error
	// Draft, if set, is a draft model for speculative decoding
	// (llama-server's -md, speculative.go): a smaller model of the same
	// vocabulary (one of another is refused), of which each slot keeps a
	// session of its context, run with DraftPredictor (nil: dense). A
	// draft holds up to DraftMax tokens (--draft-max; 0:
	// engine.DefaultDraftMax) while the draft model gives them at least
	// DraftPMin (--draft-p-min, taken as it is: the flag's default is
	// engine.DefaultDraftPMin); a request's speculative.n_max, n_min and
	// p_min stand in for them.
	Draft          *engine.Model
	DraftPredictor predictors.Predictor
	DraftMax       int
	DraftPMin      float64
	// Lookup, when positive, drafts by prompt lookup instead (run's
	// --lookup, engine.Lookup): up to Lookup tokens a step from where the
	// slot's text's last tokens occurred before. Not with Draft.
	Lookup int
}

// Server is an http.Handler around one loaded model.
type Server struct {
	cfg      Config
	model    *engine.Model
	chat     *Chat
	fileName string
	nctx     int
	created  int64
	mux      *http.ServeMux
	paths    []string // the endpoints' paths, for notFound

	pool   *ops.Pool
	runner *graph.Runner
	slots  []*slot
	queue  *queue
	// embedSess runs the embedding requests (embed.go), made on the first.
	embedSess *graph.Session
	// embedRunner runs them: the scheduler's runner, or one of the host
	// program when the model's runs on a device (Model.HiddenProgram).
	embedRunner *graph.Runner
	// deferred holds the requests waiting for their slot to be free: slot
	// actions, and requests that asked for a slot (id_slot).
	deferred []*job
	// requests counts the requests admitted: the scheduler's clock for
	// which slot was used last.
	requests int

	draining  atomic.Bool // refuse new generations
	cancelAll atomic.Bool // end the ones in flight
	quit      chan struct{}
	loopDone  chan struct{}
	closeOnce sync.Once

	metrics metrics
}

// New starts the scheduler for m. Close stops it.
func New(m *engine.Model, cfg Config) (*Server, error) {
	if cfg.Slots <= 0 {
		cfg.Slots = 1
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 4 << 20
	}
	if cfg.DefaultMaxTokens <= 0 {
		cfg.DefaultMaxTokens = -1
	}
	file := filepath.Base(m.Path)
	if strings.HasSuffix(file, "-"+models.DefaultName) {
		file = models.DefaultName // the built-in model, unpacked under a hash prefix
	}
	file = strings.TrimSuffix(file, ".gguf")
	if cfg.ModelName == "" {
		cfg.ModelName = file
	}
	switch cfg.Pooling {
	case "":
		cfg.Pooling = PoolingMean
	case engine.PoolingNone:
		// As llama-server's OpenAI endpoint: an input is one vector.
		return nil, fmt.Errorf("--pooling none: the embeddings endpoints give one vector an input; want mean, last or cls")
	default:
		if !slices.Contains(engine.Poolings, cfg.Pooling) {
			return nil, fmt.Errorf("--pooling %q: want mean, last or cls", cfg.Pooling)
		}
	}
	nctx := m.Context(cfg.Ctx)
	if err := m.CheckContext(nctx, cfg.Slots); err != nil {
		return nil, err
	}
	if cfg.SlotSavePath != "" {
		// As llama-server, which makes the directory at start.
		if err := os.MkdirAll(cfg.SlotSavePath, 0o755); err != nil {
			return nil, fmt.Errorf("--slot-save-path: %v", err)
		}
	}
	chat, err := NewChat(m, cfg.ChatTemplate)
	if err != nil && cfg.ChatTemplate != "" {
		return nil, fmt.Errorf("--chat-template-file: %v", err)
	} else if err != nil {
		return nil, fmt.Errorf("%s: tokenizer.chat_template: %v (serve it with --chat-template-file)", m.Path, err)
	}
	s := &Server{cfg: cfg, model: m, chat: chat, fileName: file, nctx: nctx, created: time.Now().Unix(),
		queue: newQueue(), quit: make(chan struct{}), loopDone: make(chan struct{})}
	s.pool = ops.NewPool(cfg.Threads)
	s.runner = m.Prog.NewRunner(s.pool)
	if cfg.Prepare != nil {
		if err := cfg.Prepare(s.runner); err != nil {
			s.pool.Close()
			return nil, err
		}
	}
	for range cfg.Slots {
		s.slots = append(s.slots, &slot{id: len(s.slots), sess: m.NewSession(nctx, s.pool)})
	}
	if err := s.newDrafts(); err != nil {
		s.pool.Close()
		return nil, err
	}
	s.metrics.slotsTotal = len(s.slots)
	s.routes()
	go s.loop()
	return s, nil
}

// ModelName is the id clients use.
func (s *Server) ModelName() string { return s.cfg.ModelName }

// NCtx is each slot's context length.
func (s *Server) NCtx() int { return s.nctx }

func (s *Server) routes() {
	s.mux = http.NewServeMux()
	s.handle("GET", "/health", s.health)
	s.handle("GET", "/v1/models", s.auth(s.listModels))
	s.handle("GET", "/v1/models/{id...}", s.auth(s.getModel))
	s.handle("POST", "/v1/chat/completions", s.auth(s.chatCompletions))
	s.handle("POST", "/v1/completions", s.auth(s.completions))
	s.handle("POST", "/tokenize", s.auth(s.tokenize))
	s.handle("POST", "/detokenize", s.auth(s.detokenize))
	s.handle("GET", "/metrics", s.auth(s.serveMetrics))
	s.handle("GET", "/props", s.auth(s.props))
	s.handle("POST", "/slots/{id}", s.auth(s.slotAction)) // slots.go
	s.handle("POST", "/apply-template", s.auth(s.applyTemplate))
	s.handle("POST", "/completion", s.nativeAuth(s.nativeCompletion))     // native.go: llama-server's own
	s.handle("POST", "/completions", s.nativeAuth(s.nativeCompletion))    // and its alias
	s.handle("POST", "/v1/embeddings", s.auth(s.embeddings))              // embed.go
	s.handle("POST", "/api/embed", s.ollamaAuth(s.ollamaEmbed))           // ollama's
	s.handle("POST", "/api/embeddings", s.ollamaAuth(s.ollamaEmbeddings)) // ollama's legacy
	s.ollamaRoutes()                                                      // ollama.go
	s.mux.HandleFunc("/", s.notFound)
}

// handle registers an endpoint; notFound then answers another method on
// its path with 405.
func (s *Server) handle(method, path string, h http.HandlerFunc) {
	s.mux.HandleFunc(method+" "+path, h)
	s.paths = append(s.paths, path)
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

func (s *Server) auth(h http.HandlerFunc) http.HandlerFunc {
	if s.cfg.APIKey == "" {
		return h
	}
	want := []byte("Bearer " + s.cfg.APIKey)
	return func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			writeError(w, &apiError{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: opt("invalid_api_key"),
				Message: "Incorrect or missing API key: send \"Authorization: Bearer KEY\""})
			return
		}
		h(w, r)
	}
}

// notFound answers unknown paths, and known paths with the wrong method,
// in the JSON error shape rather than the mux's plain text.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	for _, p := range s.paths {
		if r.URL.Path == p {
			writeError(w, newError(http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed", "%s is not allowed on %s", r.Method, p))
			return
		}
	}
	writeError(w, newError(http.StatusNotFound, "invalid_request_error", "not_found", "no endpoint %s %s", r.Method, r.URL.Path))
}

// Drain makes new generation requests fail with 503 while those already
// accepted run on: the first step of a graceful shutdown.
func (s *Server) Drain() { s.draining.Store(true) }

// CancelAll ends every request in flight or queued: streams get an error
// event and close. Used when a graceful shutdown runs out of time.
func (s *Server) CancelAll() {
	s.cancelAll.Store(true)
	s.cancelQueued()
	s.queue.poke()
}

// Close stops the scheduler (cancelling what is left) and frees the workers.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.draining.Store(true)
		close(s.quit)
		<-s.loopDone
		s.pool.Close()
	})
}
