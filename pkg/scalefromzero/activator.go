package scalefromzero

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/wva-project/wva/pkg/budget"
)

// ModelWaker wakes the groups at zero that serve a model.
type ModelWaker interface {
	WakeModel(ctx context.Context, modelID string, seen time.Time) []Outcome
}

// Activator is an OpenAI-compatible reverse proxy for setups without an
// EPP: a request for a model that is not ready wakes the model and is held
// (up to MaxWait) until the backend answers its health check, then
// forwarded with the response streamed as it comes (SSE intact).
type Activator struct {
	// Backends maps a model ID (the request's "model") to its backend base URL.
	Backends map[string]*url.URL
	Waker    ModelWaker
	Metrics  *Metrics
	// MaxWait bounds how long a request is held.
	MaxWait time.Duration
	// HealthPath is probed on the backend; 200 means ready (vLLM: /health).
	HealthPath    string
	ProbeInterval time.Duration
	// RetryAfter is sent with 503 when the wait runs out or a cap is hit.
	RetryAfter time.Duration
	// MaxBodyBytes bounds one request body (413 beyond).
	MaxBodyBytes int64
	// MaxHeldRequests bounds the requests waiting for a model at once;
	// MaxHeldBytes the request bodies in memory at once (being read, held
	// or forwarded). Beyond either: 503 with Retry-After, so a burst
	// against a model at zero cannot take the process past its memory limit.
	MaxHeldRequests int64
	MaxHeldBytes    int64
	// ReadTimeout bounds reading a request's headers and body,
	// ResponseTimeout a forwarded response (after the hold), IdleTimeout
	// an idle keep-alive connection; see Server.
	ReadTimeout     time.Duration
	ResponseTimeout time.Duration
	IdleTimeout     time.Duration
	Client          *http.Client

	proxies   map[string]*httputil.ReverseProxy
	mu        sync.Mutex
	models    map[string]*readiness
	held      atomic.Int64
	heldBytes atomic.Int64
	// peakBytes is the most heldBytes has been (for the load test).
	peakBytes atomic.Int64
}

// readiness is one model's backend state, shared by the requests held for
// it: one prober per model however many requests wait.
type readiness struct {
	ready   bool
	waiters int
	done    chan struct{} // closed when the prober sees the backend ready
}

// holdKey carries a request's hold state into the proxy's error handler.
type holdKey struct{}

type hold struct {
	model    string
	body     []byte
	start    time.Time
	deadline time.Time
	retried  bool
}

// NewActivator fills defaults and builds one reverse proxy per backend.
func NewActivator(a *Activator) *Activator {
	if a.HealthPath == "" {
		a.HealthPath = "/health"
	}
	if a.ProbeInterval <= 0 {
		a.ProbeInterval = 100 * time.Millisecond
	}
	if a.RetryAfter <= 0 {
		a.RetryAfter = 5 * time.Second
	}
	if a.MaxBodyBytes <= 0 {
		a.MaxBodyBytes = 4 << 20
	}
	if a.MaxHeldBytes <= 0 {
		a.MaxHeldBytes = 64 << 20
	}
	if a.MaxHeldRequests <= 0 {
		a.MaxHeldRequests = 100
	}
	if a.ReadTimeout <= 0 {
		a.ReadTimeout = 30 * time.Second
	}
	if a.ResponseTimeout <= 0 {
		a.ResponseTimeout = 10 * time.Minute
	}
	if a.IdleTimeout <= 0 {
		a.IdleTimeout = 90 * time.Second
	}
	if a.Client == nil {
		a.Client = &http.Client{Timeout: time.Second}
	}
	a.models = map[string]*readiness{}
	a.proxies = map[string]*httputil.ReverseProxy{}
	for model, u := range a.Backends {
		a.proxies[model] = &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(u)
				pr.SetXForwarded()
			},
			// Flush every write: SSE chunks must reach the client as the
			// backend produces them.
			FlushInterval: -1,
			ErrorHandler:  a.proxyError,
		}
	}
	return a
}

// Server is the activator's http.Server. ReadTimeout cuts off clients that
// send headers and body slowly; the write deadline covers the longest hold
// plus ResponseTimeout, so a forwarded response may stream that long.
func (a *Activator) Server() *http.Server {
	return &http.Server{Handler: a, ReadHeaderTimeout: min(10*time.Second, a.ReadTimeout), ReadTimeout: a.ReadTimeout,
		WriteTimeout: a.MaxWait + a.ResponseTimeout, IdleTimeout: a.IdleTimeout}
}

// ServeHTTP implements http.Handler.
func (a *Activator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if r.Method == http.MethodGet && strings.TrimSuffix(r.URL.Path, "/") == "/v1/models" {
		a.listModels(w)
		return
	}
	body, reserved, ok := a.readBody(w, r)
	defer a.release(reserved)
	if !ok {
		return
	}
	var req struct {
		Model string `json:"model"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.Model == "" {
		a.fail(w, http.StatusBadRequest, "bad_request", "invalid_request_error", `the request body must be JSON with a "model" field`, nil)
		return
	}
	proxy, ok := a.proxies[req.Model]
	if !ok {
		a.fail(w, http.StatusNotFound, "unknown_model", "invalid_request_error", fmt.Sprintf("model %q is not served here", req.Model), nil)
		return
	}
	h := &hold{model: req.Model, body: body, start: start, deadline: start.Add(a.MaxWait)}
	result := "forwarded"
	if !a.isReady(req.Model) {
		if !a.holdUntilReady(w, r, h) {
			return
		}
		result = "held_forwarded"
	}
	a.Metrics.ActivatorReqs.WithLabelValues(result).Inc()
	a.forward(w, r, proxy, h)
}

// readBody reads the request body into memory, reserving its bytes against
// MaxHeldBytes before they are allocated: all at once when Content-Length
// is given, else each time the buffer grows. It answers the client itself
// (400, 413, 503) when it returns false; the caller releases reserved.
func (a *Activator) readBody(w http.ResponseWriter, r *http.Request) (body []byte, reserved int64, ok bool) {
	tooLarge := func() {
		a.fail(w, http.StatusRequestEntityTooLarge, "too_large", "invalid_request_error",
			fmt.Sprintf("request body over %d bytes (--activator-max-body-bytes)", a.MaxBodyBytes), nil)
	}
	if r.ContentLength > a.MaxBodyBytes {
		w.Header().Set("Connection", "close")
		tooLarge()
		return nil, 0, false
	}
	rd := http.MaxBytesReader(w, r.Body, a.MaxBodyBytes)
	if r.ContentLength >= 0 {
		if !a.reserve(r.ContentLength) {
			a.overloaded(w, fmt.Sprintf("request bodies in memory would exceed %d bytes (--activator-max-held-bytes)", a.MaxHeldBytes), rd)
			return nil, 0, false
		}
		reserved = r.ContentLength
		body = make([]byte, r.ContentLength)
		if _, err := io.ReadFull(rd, body); err != nil {
			a.readFailed(w, err)
			return nil, reserved, false
		}
		return body, reserved, true
	}
	for {
		if len(body) == cap(body) {
			// Grow (doubling, from 64 KiB) only once the growth is reserved.
			newCap := min(max(2*int64(cap(body)), 64<<10), a.MaxBodyBytes+1)
			if newCap <= int64(cap(body)) {
				tooLarge() // MaxBytesReader stops first; never loop on a full buffer
				return nil, reserved, false
			}
			if !a.reserve(newCap - reserved) {
				a.overloaded(w, fmt.Sprintf("request bodies in memory would exceed %d bytes (--activator-max-held-bytes)", a.MaxHeldBytes), rd)
				return nil, reserved, false
			}
			reserved = newCap
			grown := make([]byte, len(body), newCap)
			copy(grown, body)
			body = grown
		}
		n, err := rd.Read(body[len(body):cap(body)])
		body = body[:len(body)+n]
		if errors.Is(err, io.EOF) {
			return body, reserved, true
		}
		if err != nil {
			if _, big := errors.AsType[*http.MaxBytesError](err); big {
				tooLarge()
			} else {
				a.readFailed(w, err)
			}
			return nil, reserved, false
		}
	}
}

// maxDrainBytes is what a refused request's body may still be read for
// (net/http's own limit for unread bodies).
const maxDrainBytes = 256 << 10

// readFailed answers a body that could not be read: 408 when the client
// was too slow for ReadTimeout, else 400.
func (a *Activator) readFailed(w http.ResponseWriter, err error) {
	w.Header().Set("Connection", "close")
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		a.fail(w, http.StatusRequestTimeout, "read_timeout", "invalid_request_error",
			fmt.Sprintf("the request body did not arrive within %s (--activator-read-timeout)", a.ReadTimeout), nil)
		return
	}
	a.fail(w, http.StatusBadRequest, "bad_request", "invalid_request_error", fmt.Sprintf("reading the request body: %v", err), nil)
}

// reserve takes n bytes of MaxHeldBytes, or nothing if they do not fit.
func (a *Activator) reserve(n int64) bool {
	for {
		cur := a.heldBytes.Load()
		if cur+n > a.MaxHeldBytes {
			return false
		}
		if a.heldBytes.CompareAndSwap(cur, cur+n) {
			a.Metrics.ActivatorHeldBytes.Add(float64(n))
			for {
				peak := a.peakBytes.Load()
				if cur+n <= peak || a.peakBytes.CompareAndSwap(peak, cur+n) {
					return true
				}
			}
		}
	}
}

func (a *Activator) release(n int64) {
	if n > 0 {
		a.heldBytes.Add(-n)
		a.Metrics.ActivatorHeldBytes.Sub(float64(n))
	}
}

// overloaded answers 503 with Retry-After: a cap is reached, the client
// should come back (by then the model may be ready and requests flowing).
// unread is the rest of a body not taken into memory: up to maxDrainBytes
// of it are discarded so that a client still uploading a typical request
// gets this answer rather than a connection reset; a larger rest is not
// worth the bandwidth under overload, and the connection is closed.
func (a *Activator) overloaded(w http.ResponseWriter, msg string, unread io.Reader) {
	if unread != nil {
		if _, err := io.CopyN(io.Discard, unread, maxDrainBytes+1); !errors.Is(err, io.EOF) {
			w.Header().Set("Connection", "close")
		}
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(a.RetryAfter.Seconds()))))
	a.fail(w, http.StatusServiceUnavailable, "overloaded", "overloaded", msg, nil)
}

func (a *Activator) forward(w http.ResponseWriter, r *http.Request, proxy *httputil.ReverseProxy, h *hold) {
	r = r.WithContext(context.WithValue(r.Context(), holdKey{}, h))
	r.Body = io.NopCloser(bytes.NewReader(h.body))
	r.ContentLength = int64(len(h.body))
	proxy.ServeHTTP(w, r)
}

// holdUntilReady wakes the model and waits for its backend; it answers the
// client itself (429, 503) and returns false when the request cannot go on.
func (a *Activator) holdUntilReady(w http.ResponseWriter, r *http.Request, h *hold) bool {
	ctx, cancel := context.WithDeadline(r.Context(), h.deadline)
	defer cancel()
	if a.held.Add(1) > a.MaxHeldRequests {
		a.held.Add(-1)
		// Still wake the model: the requests already held may be for others.
		a.Waker.WakeModel(ctx, h.model, time.Now())
		a.overloaded(w, fmt.Sprintf("%d requests already wait for their model (--activator-max-held-requests)", a.MaxHeldRequests), nil)
		return false
	}
	a.Metrics.ActivatorHeld.Inc()
	defer func() {
		a.held.Add(-1)
		a.Metrics.ActivatorHeld.Dec()
	}()
	outcomes := a.Waker.WakeModel(ctx, h.model, time.Now())
	if blockers, ok := allBlocked(outcomes); ok {
		msgs := make([]string, 0, len(outcomes))
		for _, o := range outcomes {
			msgs = append(msgs, o.Message)
		}
		a.fail(w, http.StatusTooManyRequests, "budget_blocked", "insufficient_gpu_budget", strings.Join(msgs, "; "), blockers)
		return false
	}
	err := a.waitReady(ctx, h.model)
	a.Metrics.ActivatorHold.Observe(time.Since(h.start).Seconds())
	switch {
	case err == nil:
		return true
	case r.Context().Err() != nil:
		a.Metrics.ActivatorReqs.WithLabelValues("canceled").Inc()
		return false
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(a.RetryAfter.Seconds()))))
	a.fail(w, http.StatusServiceUnavailable, "timeout", "model_not_ready",
		fmt.Sprintf("model %q did not become ready within %s", h.model, a.MaxWait), nil)
	return false
}

// proxyError handles a failed forward. A refused connection, or a kept-alive
// one dropped before any response, means the backend went away (scaled to
// zero since we last saw it ready): nothing was sent to the client yet, so
// hold the request until the backend is healthy and try once more.
func (a *Activator) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	h, _ := r.Context().Value(holdKey{}).(*hold)
	if h != nil && !h.retried && backendGone(err) && time.Now().Before(h.deadline) {
		h.retried = true
		a.setReady(h.model, false)
		klog.V(2).InfoS("backend refused the connection; holding the request until it is ready again", "model", h.model, "err", err)
		if a.holdUntilReady(w, r, h) {
			a.forward(w, r, a.proxies[h.model], h)
		}
		return
	}
	if r.Context().Err() != nil {
		return // the client went away
	}
	klog.V(2).InfoS("forwarding failed", "err", err)
	a.fail(w, http.StatusBadGateway, "backend_error", "backend_error", fmt.Sprintf("backend: %v", err), nil)
}

func backendGone(err error) bool {
	var opErr *net.OpError
	return (errors.As(err, &opErr) && opErr.Op == "dial") || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) ||
		// A kept-alive connection the transport was still writing on when
		// the backend closed it.
		errors.Is(err, net.ErrClosed)
}

// allBlocked reports whether every group of the model was refused by the
// budget (a model with some group waking is worth waiting for).
func allBlocked(outcomes []Outcome) ([]budget.Holder, bool) {
	if len(outcomes) == 0 {
		return nil, false
	}
	var holders []budget.Holder
	for _, o := range outcomes {
		if o.Result != ResultBlocked {
			return nil, false
		}
		holders = append(holders, o.Blockers...)
	}
	return holders, true
}

func (a *Activator) isReady(model string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.models[model]
	return st != nil && st.ready
}

func (a *Activator) setReady(model string, ready bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if st := a.models[model]; st != nil {
		st.ready = ready
	}
}

// waitReady blocks until the model's backend passes its health check or
// ctx ends.
func (a *Activator) waitReady(ctx context.Context, model string) error {
	a.mu.Lock()
	st := a.models[model]
	if st == nil {
		st = &readiness{}
		a.models[model] = st
	}
	if st.ready {
		a.mu.Unlock()
		return nil
	}
	st.waiters++
	if st.done == nil {
		st.done = make(chan struct{})
		go a.probe(model, st, st.done)
	}
	done := st.done
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		st.waiters--
		a.mu.Unlock()
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// probe checks the backend every ProbeInterval until it is ready or no
// request waits any more.
func (a *Activator) probe(model string, st *readiness, done chan struct{}) {
	target := a.Backends[model].JoinPath(a.HealthPath).String()
	for {
		if a.healthy(target) {
			a.mu.Lock()
			st.ready, st.done = true, nil
			a.mu.Unlock()
			close(done)
			return
		}
		a.mu.Lock()
		if st.waiters == 0 {
			st.done = nil
			a.mu.Unlock()
			return
		}
		a.mu.Unlock()
		time.Sleep(a.ProbeInterval)
	}
}

func (a *Activator) healthy(target string) bool {
	resp, err := a.Client.Get(target)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (a *Activator) listModels(w http.ResponseWriter) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		OwnedBy string `json:"owned_by"`
	}
	out := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for id := range a.Backends {
		out.Data = append(out.Data, model{ID: id, Object: "model", OwnedBy: "wva-activator"})
	}
	sort.Slice(out.Data, func(i, j int) bool { return out.Data[i].ID < out.Data[j].ID })
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// apiError is the OpenAI error shape, plus who holds the budget on 429.
type apiError struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    int    `json:"code"`
	} `json:"error"`
	Blocking []budget.Holder `json:"blocking,omitempty"`
}

func (a *Activator) fail(w http.ResponseWriter, status int, result, typ, msg string, blocking []budget.Holder) {
	a.Metrics.ActivatorReqs.WithLabelValues(result).Inc()
	var e apiError
	e.Error.Message, e.Error.Type, e.Error.Code = msg, typ, status
	e.Blocking = blocking
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(e)
}
