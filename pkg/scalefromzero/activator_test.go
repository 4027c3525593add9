package scalefromzero

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/budget"
)

type fakeModelWaker struct {
	mu       sync.Mutex
	calls    []string
	outcomes []Outcome
}

func (f *fakeModelWaker) WakeModel(_ context.Context, model string, _ time.Time) []Outcome {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, model)
	return f.outcomes
}

func (f *fakeModelWaker) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// backend is a model server: /health is 503 until ready; completions echo
// the model; with "stream": true it sends SSE chunks, each after the test
// lets it (next), so buffering anywhere would deadlock the test.
type backend struct {
	ready atomic.Bool
	next  chan struct{}
}

func (b *backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/health" {
		if !b.ready.Load() {
			http.Error(w, "loading", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
		return
	}
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	if !req.Stream {
		_, _ = fmt.Fprintf(w, `{"model":%q,"path":%q,"choices":[{"text":"hi"}]}`, req.Model, r.URL.Path)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for i := 1; i <= 3; i++ {
		_, _ = fmt.Fprintf(w, "data: {\"chunk\":%d}\n\n", i)
		w.(http.Flusher).Flush()
		select {
		case <-b.next:
		case <-time.After(5 * time.Second):
			return
		}
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
}

func newActivatorFixture(t *testing.T, b http.Handler, maxWait time.Duration) (*Activator, *fakeModelWaker, *httptest.Server, *httptest.Server) {
	t.Helper()
	be := httptest.NewServer(b)
	t.Cleanup(be.Close)
	u, _ := url.Parse(be.URL)
	w := &fakeModelWaker{outcomes: []Outcome{{Result: ResultScaled, Variant: "l4"}}}
	a := NewActivator(&Activator{Backends: map[string]*url.URL{"meta/llama": u}, Waker: w, Metrics: NewMetrics(nil),
		MaxWait: maxWait, ProbeInterval: 20 * time.Millisecond})
	front := httptest.NewServer(a)
	t.Cleanup(front.Close)
	return a, w, be, front
}

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	return resp
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

func TestActivatorHoldsUntilReady(t *testing.T) {
	b := &backend{}
	a, waker, _, front := newActivatorFixture(t, b, 10*time.Second)
	go func() {
		time.Sleep(300 * time.Millisecond)
		b.ready.Store(true)
	}()
	start := time.Now()
	resp := post(t, front.URL, `{"model":"meta/llama","messages":[]}`)
	body := readAll(t, resp)
	assert.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "held until the backend was ready")
	assert.JSONEq(t, `{"model":"meta/llama","path":"/v1/chat/completions","choices":[{"text":"hi"}]}`, body)
	assert.Equal(t, 1, waker.count(), "the model was woken")

	// Ready now: forwarded at once, no wake-up.
	resp = post(t, front.URL, `{"model":"meta/llama"}`)
	assert.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp))
	assert.Equal(t, 1, waker.count())
	assert.Equal(t, 1.0, testutil.ToFloat64(a.Metrics.ActivatorReqs.WithLabelValues("held_forwarded")))
	assert.Equal(t, 1.0, testutil.ToFloat64(a.Metrics.ActivatorReqs.WithLabelValues("forwarded")))
}

func TestActivatorConcurrentHeldRequests(t *testing.T) {
	b := &backend{}
	_, _, _, front := newActivatorFixture(t, b, 10*time.Second)
	var wg sync.WaitGroup
	codes := make(chan int, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := post(t, front.URL, `{"model":"meta/llama"}`)
			_ = readAll(t, resp)
			codes <- resp.StatusCode
		}()
	}
	time.Sleep(200 * time.Millisecond)
	b.ready.Store(true)
	wg.Wait()
	close(codes)
	for c := range codes {
		assert.Equal(t, http.StatusOK, c)
	}
}

func TestActivatorStreamsInOrder(t *testing.T) {
	b := &backend{next: make(chan struct{})}
	b.ready.Store(true)
	_, _, _, front := newActivatorFixture(t, b, time.Second)
	resp := post(t, front.URL, `{"model":"meta/llama","stream":true}`)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	r := bufio.NewReader(resp.Body)
	var got []string
	for len(got) < 4 {
		line, err := r.ReadString('\n')
		require.NoError(t, err, "got %v so far", got)
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		got = append(got, line)
		if len(got) <= 3 {
			// The backend sends the next chunk only after this one arrived.
			b.next <- struct{}{}
		}
	}
	assert.Equal(t, []string{`data: {"chunk":1}`, `data: {"chunk":2}`, `data: {"chunk":3}`, "data: [DONE]"}, got)
}

func TestActivatorTimeout(t *testing.T) {
	a, _, _, front := newActivatorFixture(t, &backend{}, 300*time.Millisecond)
	start := time.Now()
	resp := post(t, front.URL, `{"model":"meta/llama"}`)
	body := readAll(t, resp)
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "5", resp.Header.Get("Retry-After"), "--retry-after unset: RetryAfter")
	assert.Contains(t, body, `"type":"model_not_ready"`)
	assert.Contains(t, body, `did not become ready within 300ms`)
	assert.Equal(t, 1.0, testutil.ToFloat64(a.Metrics.ActivatorReqs.WithLabelValues("timeout")))
}

// TestActivatorBudgetBlocked: 429 with Retry-After, naming the holders
// (namespace, model, GPUs and memory) and the quotas that refused the wake.
func TestActivatorBudgetBlocked(t *testing.T) {
	a, waker, _, front := newActivatorFixture(t, &backend{}, 5*time.Second)
	holder := budget.Holder{Name: "prod/mixtral-h100", Namespace: "prod", Model: "mistral/mixtral", Amount: budget.Amount{GPUs: 6, GPUMemory: 480 << 30}}
	quota := budget.Quota{Namespace: "dev", Name: "gpus", Hard: 2, Used: 2}
	waker.outcomes = []Outcome{
		{Result: ResultBlocked, Message: "GPU budget forbids waking model meta/llama: ... held by prod/mixtral-h100 (model mistral/mixtral, 6 GPUs, 480Gi GPU memory)",
			Blockers: []budget.Holder{holder}},
		{Result: ResultBlocked, Message: "GPU budget forbids waking model meta/llama: GPU quota: dev/l4 ...", Quotas: []budget.Quota{quota}},
	}
	resp := post(t, front.URL, `{"model":"meta/llama"}`)
	body := readAll(t, resp)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Equal(t, "5", resp.Header.Get("Retry-After"), "--retry-after unset: RetryAfter")
	var e apiError
	require.NoError(t, json.Unmarshal([]byte(body), &e))
	assert.Equal(t, "insufficient_gpu_budget", e.Error.Type)
	assert.Contains(t, e.Error.Message, "held by prod/mixtral-h100 (model mistral/mixtral, 6 GPUs, 480Gi GPU memory)")
	assert.Contains(t, e.Error.Message, "GPU quota: dev/l4")
	assert.Equal(t, []budget.Holder{holder}, e.Blocking)
	assert.Equal(t, []budget.Quota{quota}, e.Quotas)
	assert.Contains(t, body, `"blocking":[{"name":"prod/mixtral-h100","namespace":"prod","modelID":"mistral/mixtral","gpus":6,"gpuMemoryBytes":515396075520}]`)
	assert.Contains(t, body, `"quotas":[{"namespace":"dev","name":"gpus","hard":2,"used":2}]`)

	a.BudgetRetryAfter = 1500 * time.Millisecond // the waker's --retry-after, rounded up
	resp = post(t, front.URL, `{"model":"meta/llama"}`)
	readAll(t, resp)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Equal(t, "2", resp.Header.Get("Retry-After"))
}

func TestActivatorRequestErrors(t *testing.T) {
	_, _, _, front := newActivatorFixture(t, &backend{}, time.Second)
	for body, want := range map[string]int{
		`{"model":"other"}`: http.StatusNotFound,
		`{"messages":[]}`:   http.StatusBadRequest,
		`not json`:          http.StatusBadRequest,
	} {
		resp := post(t, front.URL, body)
		_ = readAll(t, resp)
		assert.Equal(t, want, resp.StatusCode, body)
	}
	resp, err := http.Get(front.URL + "/v1/models")
	require.NoError(t, err)
	assert.JSONEq(t, `{"object":"list","data":[{"id":"meta/llama","object":"model","owned_by":"wva-activator"}]}`, readAll(t, resp))
}

func TestActivatorBackendGoneIsHeld(t *testing.T) {
	// The backend was ready, then scaled to zero (connection refused): the
	// request is held and retried, not answered 502.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	b := &backend{}
	b.ready.Store(true)
	srv := &http.Server{Handler: b}
	go func() { _ = srv.Serve(ln) }()
	u, _ := url.Parse("http://" + addr)
	waker := &fakeModelWaker{outcomes: []Outcome{{Result: ResultScaled}}}
	a := NewActivator(&Activator{Backends: map[string]*url.URL{"m": u}, Waker: waker, Metrics: NewMetrics(nil),
		MaxWait: 5 * time.Second, ProbeInterval: 20 * time.Millisecond})
	front := httptest.NewServer(a)
	defer front.Close()

	resp := post(t, front.URL, `{"model":"m"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp))
	require.NoError(t, srv.Close())
	woken := waker.count() // the first request found the model's state unknown

	go func() {
		time.Sleep(300 * time.Millisecond)
		ln2, err := net.Listen("tcp", addr)
		if err != nil {
			return
		}
		srv2 := &http.Server{Handler: b}
		t.Cleanup(func() { _ = srv2.Close() })
		_ = srv2.Serve(ln2)
	}()
	resp = post(t, front.URL, `{"model":"m"}`)
	body := readAll(t, resp)
	assert.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Equal(t, woken+1, waker.count(), "the refused request woke the model")
}

// TestActivatorForwardsOnlyInferencePaths: the backend's admin endpoints
// (vLLM's /sleep, LoRA loading, profiling, cache reset) are not reachable
// through the activator, however the path is spelled.
func TestActivatorForwardsOnlyInferencePaths(t *testing.T) {
	const body = `{"model":"meta/llama"}`
	tests := []struct {
		name   string
		paths  []string // --activator-paths; nil: the default
		method string
		path   string
		want   int
	}{
		{name: "completions", path: "/v1/completions", want: http.StatusOK},
		{name: "chat completions", path: "/v1/chat/completions", want: http.StatusOK},
		{name: "embeddings", path: "/v1/embeddings", want: http.StatusOK},
		{name: "sleep", path: "/sleep", want: http.StatusNotFound},
		{name: "load LoRA adapter", path: "/v1/load_lora_adapter", want: http.StatusNotFound},
		{name: "reset prefix cache", path: "/reset_prefix_cache", want: http.StatusNotFound},
		{name: "start profile", path: "/start_profile", want: http.StatusNotFound},
		{name: "dot segments", path: "/v1/completions/../../sleep", want: http.StatusNotFound},
		{name: "escaped slash", path: "/v1/chat%2Fcompletions", want: http.StatusNotFound},
		{name: "trailing slash", path: "/v1/completions/", want: http.StatusNotFound},
		{name: "GET on an inference path", method: http.MethodGet, path: "/v1/completions", want: http.StatusMethodNotAllowed},
		{name: "configured path", paths: []string{"/v1/responses"}, path: "/v1/responses", want: http.StatusOK},
		{name: "default path not configured", paths: []string{"/v1/responses"}, path: "/v1/completions", want: http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &backend{}
			b.ready.Store(true)
			var mu sync.Mutex
			var reached []string
			be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/health" {
					mu.Lock()
					reached = append(reached, r.URL.EscapedPath())
					mu.Unlock()
				}
				b.ServeHTTP(w, r)
			}))
			t.Cleanup(be.Close)
			u, _ := url.Parse(be.URL)
			a := NewActivator(&Activator{Backends: map[string]*url.URL{"meta/llama": u}, Waker: &fakeModelWaker{}, Metrics: NewMetrics(nil),
				MaxWait: time.Second, ProbeInterval: 20 * time.Millisecond, Paths: tt.paths})
			front := httptest.NewServer(a)
			t.Cleanup(front.Close)

			method := tt.method
			if method == "" {
				method = http.MethodPost
			}
			req, err := http.NewRequest(method, front.URL+tt.path, strings.NewReader(body))
			require.NoError(t, err)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			got := readAll(t, resp)
			assert.Equal(t, tt.want, resp.StatusCode, got)
			mu.Lock()
			defer mu.Unlock()
			switch tt.want {
			case http.StatusOK:
				assert.Equal(t, []string{tt.path}, reached)
			case http.StatusNotFound:
				assert.Empty(t, reached, "a refused path never reaches the backend")
				assert.Contains(t, got, "is not forwarded by the activator (--activator-paths: ")
				assert.Equal(t, 1.0, testutil.ToFloat64(a.Metrics.ActivatorReqs.WithLabelValues("path_not_allowed")))
			case http.StatusMethodNotAllowed:
				assert.Empty(t, reached)
				assert.Equal(t, "POST", resp.Header.Get("Allow"))
				assert.Equal(t, 1.0, testutil.ToFloat64(a.Metrics.ActivatorReqs.WithLabelValues("method_not_allowed")))
			}
		})
	}
}

// TestBackendGone: the forwarding errors that mean the backend went away
// (and the request was not answered) are held and retried; the others are a
// 502.
func TestBackendGone(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "connection refused", err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, want: true},
		{name: "reset while reading", err: &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, want: true},
		{name: "closed before any response", err: io.EOF, want: true},
		{name: "written to a closed connection", err: fmt.Errorf("write: %w", net.ErrClosed), want: true},
		{name: "idle connection closed by the backend", err: errors.New("http: server closed idle connection"), want: true},
		{name: "response timeout", err: context.DeadlineExceeded, want: false},
		{name: "malformed response", err: errors.New(`net/http: HTTP/1.x transport connection broken: malformed HTTP response "\x15\x03"`), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, backendGone(tt.err))
		})
	}
}
