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

	"golang.org/x/net/netutil"
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
	// BudgetRetryAfter is sent (rounded up to whole seconds, at least 1)
	// with 429 when the GPU budget refuses the wake: the waker re-decides a
	// refused group after --retry-after (0: RetryAfter).
	BudgetRetryAfter time.Duration
	// MaxBodyBytes bounds one request body (413 beyond).
	MaxBodyBytes int64
	// MaxHeldRequests bounds the requests waiting for a model at once;
	// MaxHeldBytes the requests (headers and bodies) in memory at once
	// (being read, held or forwarded). Beyond either: 503 with Retry-After,
	// so a burst against a model at zero cannot take the process past its
	// memory limit.
	MaxHeldRequests int64
	MaxHeldBytes    int64
	// MaxHeldRequestsPerModel and MaxHeldBytesPerModel are one model's share
	// of the two caps while its requests wait (default: half of each with
	// several models), so requests for a model that never becomes ready
	// leave room for the others.
	MaxHeldRequestsPerModel int64
	MaxHeldBytesPerModel    int64
	// MaxHeaderBytes bounds one request's headers (431 beyond);
	// MaxConnections the connections served at once (see Listener): headers
	// still being read take about MaxConnections x 3 x MaxHeaderBytes.
	MaxHeaderBytes int
	MaxConnections int
	// Paths are the request paths forwarded (POST only); any other path is
	// 404 and never reaches a backend, which also serves admin endpoints
	// (vLLM: /sleep, /v1/load_lora_adapter, ...). GET /v1/models is answered
	// by the activator itself.
	Paths []string
	// ReadTimeout bounds reading a request's headers and body,
	// ResponseTimeout a forwarded response (after the hold), IdleTimeout
	// an idle keep-alive connection; see Server.
	ReadTimeout     time.Duration
	ResponseTimeout time.Duration
	IdleTimeout     time.Duration
	Client          *http.Client

	proxies   map[string]*httputil.ReverseProxy
	paths     map[string]bool
	mu        sync.Mutex
	models    map[string]*readiness
	waiting   map[string]*modelHold // per model, under mu
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

// modelHold is what one model's waiting requests take of the held caps.
type modelHold struct {
	requests, bytes int64
}

// DefaultPaths are the inference endpoints of a vLLM OpenAI-compatible
// server whose request body names the model.
var DefaultPaths = []string{"/v1/completions", "/v1/chat/completions", "/v1/embeddings"}

// holdKey carries a request's hold state into the proxy's error handler.
type holdKey struct{}

type hold struct {
	model    string
	body     []byte
	reserved int64 // bytes of MaxHeldBytes taken: headers and body
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
	// With one model there is no other to leave room for.
	share := int64(2)
	if len(a.Backends) == 1 {
		share = 1
	}
	if a.MaxHeldRequestsPerModel <= 0 {
		a.MaxHeldRequestsPerModel = max(1, a.MaxHeldRequests/share)
	}
	if a.MaxHeldBytesPerModel <= 0 {
		a.MaxHeldBytesPerModel = max(a.MaxBodyBytes, a.MaxHeldBytes/share)
	}
	if a.MaxHeaderBytes <= 0 {
		a.MaxHeaderBytes = 16 << 10
	}
	if a.MaxConnections <= 0 {
		a.MaxConnections = 1024
	}
	if len(a.Paths) == 0 {
		a.Paths = DefaultPaths
	}
	a.paths = map[string]bool{}
	for _, p := range a.Paths {
		a.paths[p] = true
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
	a.waiting = map[string]*modelHold{}
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
// Serve it on Listener(ln).
func (a *Activator) Server() *http.Server {
	return &http.Server{Handler: a, ReadHeaderTimeout: min(10*time.Second, a.ReadTimeout), ReadTimeout: a.ReadTimeout,
		WriteTimeout: a.MaxWait + a.ResponseTimeout, IdleTimeout: a.IdleTimeout, MaxHeaderBytes: a.MaxHeaderBytes}
}

// Listener serves at most MaxConnections connections of ln at once; further
// ones wait in the kernel's accept queue until one closes. Every connection
// costs memory before its request is complete (its headers), which the
// held-bytes cap cannot see.
func (a *Activator) Listener(ln net.Listener) net.Listener {
	return netutil.LimitListener(ln, a.MaxConnections)
}

// ServeHTTP implements http.Handler.
func (a *Activator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if r.Method == http.MethodGet && strings.TrimSuffix(r.URL.Path, "/") == "/v1/models" {
		a.listModels(w)
		return
	}
	switch routeRequest(a.paths, r.Method, r.URL) {
	case routeNotFound:
		a.fail(w, http.StatusNotFound, "path_not_allowed", "invalid_request_error",
			fmt.Sprintf("path %q is not forwarded by the activator (--activator-paths: %s)", r.URL.EscapedPath(), strings.Join(a.Paths, ",")), nil)
		return
	case routeBadMethod:
		w.Header().Set("Allow", http.MethodPost)
		a.fail(w, http.StatusMethodNotAllowed, "method_not_allowed", "invalid_request_error",
			fmt.Sprintf("%s %s: the activator forwards POST only", r.Method, r.URL.Path), nil)
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
	h := &hold{model: req.Model, body: body, reserved: reserved, start: start, deadline: start.Add(a.MaxWait)}
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

// route is what the activator does with a request line.
type route int

const (
	routeForward route = iota
	routeNotFound
	routeBadMethod
)

// routeRequest forwards POSTs to the allowed paths only. The path must be
// spelled without escapes: "/v1/chat%2Fcompletions" might be routed by the
// backend differently from how it reads here.
func routeRequest(paths map[string]bool, method string, u *url.URL) route {
	if !paths[u.Path] || u.EscapedPath() != u.Path {
		return routeNotFound
	}
	if method != http.MethodPost {
		return routeBadMethod
	}
	return routeForward
}

// headerBytes is about what a parsed request's line and headers take in
// memory.
func headerBytes(r *http.Request) int64 {
	n := len(r.Method) + len(r.RequestURI) + len(r.Proto) + len(r.Host) + 4
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return int64(n)
}

// firstChunk is the body buffer before any byte has arrived; it doubles as
// bytes arrive, so a client holds at most about twice what it has sent.
const firstChunk = 4 << 10

// readBody reads the request body into memory. The headers' size is
// reserved against MaxHeldBytes first, then the body buffer's before each
// time it grows, as bytes arrive (a declared Content-Length only bounds
// the growth): a client that announces 4 MiB and sends little holds
// little. It answers the client itself (400, 413, 503) when it returns
// false; the caller releases reserved.
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
	overloaded := func() {
		a.overloaded(w, fmt.Sprintf("request bodies in memory would exceed %d bytes (--activator-max-held-bytes)", a.MaxHeldBytes), rd)
	}
	reserved = headerBytes(r)
	if !a.reserve(reserved) {
		overloaded()
		return nil, 0, false
	}
	// limit is the most the buffer grows to: the declared length, or one
	// byte over the cap to see that a chunked body is too large.
	limit := a.MaxBodyBytes + 1
	if r.ContentLength >= 0 {
		limit = r.ContentLength
	}
	for {
		if len(body) == cap(body) {
			if int64(len(body)) == limit {
				if r.ContentLength >= 0 {
					return body, reserved, true
				}
				tooLarge() // MaxBytesReader stops first; never loop on a full buffer
				return nil, reserved, false
			}
			newCap := min(max(2*int64(cap(body)), firstChunk), limit)
			if !a.reserve(newCap - int64(cap(body))) {
				overloaded()
				return nil, reserved, false
			}
			reserved += newCap - int64(cap(body))
			grown := make([]byte, len(body), newCap)
			copy(grown, body)
			body = grown
		}
		n, err := rd.Read(body[len(body):cap(body)])
		body = body[:len(body)+n]
		if errors.Is(err, io.EOF) {
			if r.ContentLength >= 0 && int64(len(body)) < r.ContentLength {
				a.readFailed(w, io.ErrUnexpectedEOF)
				return nil, reserved, false
			}
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
	defer a.held.Add(-1)
	if msg := a.admitHold(h); msg != "" {
		a.Waker.WakeModel(ctx, h.model, time.Now())
		a.overloaded(w, msg, nil)
		return false
	}
	a.Metrics.ActivatorHeld.Inc()
	defer func() {
		a.leaveHold(h)
		a.Metrics.ActivatorHeld.Dec()
	}()
	outcomes := a.Waker.WakeModel(ctx, h.model, time.Now())
	if blockers, quotas, ok := allBlocked(outcomes); ok {
		msgs := make([]string, 0, len(outcomes))
		for _, o := range outcomes {
			msgs = append(msgs, o.Message)
		}
		retry := a.BudgetRetryAfter
		if retry <= 0 {
			retry = a.RetryAfter
		}
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(retry.Seconds())))))
		a.failBlocked(w, strings.Join(msgs, "; "), blockers, quotas)
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

// admitHold takes h's place in its model's share of the held caps, or
// says why it cannot.
func (a *Activator) admitHold(h *hold) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := a.waiting[h.model]
	if m == nil {
		m = &modelHold{}
	}
	if msg := modelShareExceeded(h.model, *m, h.reserved, a.MaxHeldRequestsPerModel, a.MaxHeldBytesPerModel); msg != "" {
		return msg
	}
	a.waiting[h.model] = m
	m.requests++
	m.bytes += h.reserved
	return ""
}

func (a *Activator) leaveHold(h *hold) {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := a.waiting[h.model]
	m.requests--
	m.bytes -= h.reserved
	if m.requests == 0 {
		delete(a.waiting, h.model)
	}
}

// modelShareExceeded says why one more request of size bytes may not wait
// for model, whose waiting requests already take m; "" if it may. A
// model's first waiting request always may: any request the global caps
// admit can wait alone.
func modelShareExceeded(model string, m modelHold, size, maxRequests, maxBytes int64) string {
	switch {
	case m.requests == 0:
	case m.requests+1 > maxRequests:
		return fmt.Sprintf("%d requests already wait for model %q (--activator-max-held-requests-per-model)", m.requests, model)
	case m.bytes+size > maxBytes:
		return fmt.Sprintf("requests waiting for model %q would hold over %d bytes (--activator-max-held-bytes-per-model)", model, maxBytes)
	}
	return ""
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
		errors.Is(err, net.ErrClosed) ||
		// A kept-alive connection the backend closed while it sat idle, picked
		// for this request before the transport saw the close. net/http does
		// not export this error and does not retry a POST on it.
		strings.Contains(err.Error(), serverClosedIdle)
}

// serverClosedIdle is the message of net/http's unexported errServerClosedIdle.
const serverClosedIdle = "http: server closed idle connection"

// allBlocked reports whether every group of the model was refused by the
// budget (a model with some group waking is worth waiting for), with the
// holders and quotas that refused them.
func allBlocked(outcomes []Outcome) ([]budget.Holder, []budget.Quota, bool) {
	if len(outcomes) == 0 {
		return nil, nil, false
	}
	var holders []budget.Holder
	var quotas []budget.Quota
	for _, o := range outcomes {
		if o.Result != ResultBlocked {
			return nil, nil, false
		}
		holders = append(holders, o.Blockers...)
		quotas = append(quotas, o.Quotas...)
	}
	return holders, quotas, true
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

// apiError is the OpenAI error shape, plus on 429 what refused the wake:
// the pools' holders (namespace, model, GPUs and memory each holds) and
// the namespace quotas.
type apiError struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    int    `json:"code"`
	} `json:"error"`
	Blocking []budget.Holder `json:"blocking,omitempty"`
	Quotas   []budget.Quota  `json:"quotas,omitempty"`
}

func (a *Activator) fail(w http.ResponseWriter, status int, result, typ, msg string, blocking []budget.Holder) {
	var e apiError
	e.Blocking = blocking
	a.write(w, status, result, typ, msg, e)
}

// failBlocked answers 429: the GPU budget refused every group of the model.
func (a *Activator) failBlocked(w http.ResponseWriter, msg string, blocking []budget.Holder, quotas []budget.Quota) {
	var e apiError
	e.Blocking, e.Quotas = blocking, quotas
	a.write(w, http.StatusTooManyRequests, "budget_blocked", "insufficient_gpu_budget", msg, e)
}

func (a *Activator) write(w http.ResponseWriter, status int, result, typ, msg string, e apiError) {
	a.Metrics.ActivatorReqs.WithLabelValues(result).Inc()
	e.Error.Message, e.Error.Type, e.Error.Code = msg, typ, status
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(e)
}
