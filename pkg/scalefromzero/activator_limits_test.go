package scalefromzero

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// padBody is a JSON request body of exactly size bytes, generated as it is
// read so the clients of the load test hold no copy of it. With delay it
// hands out at most chunk bytes per Read and sleeps first: a slow sender.
type padBody struct {
	size, off int
	chunk     int
	delay     time.Duration
}

const padPrefix = `{"model":"meta/llama","pad":"`

var padXs = []byte(strings.Repeat("x", 32<<10))

func (p *padBody) Read(b []byte) (int, error) {
	if p.off >= p.size {
		return 0, io.EOF
	}
	if p.delay > 0 {
		time.Sleep(p.delay)
		b = b[:min(len(b), p.chunk)]
	}
	n := 0
	for n < len(b) && p.off < p.size {
		var src []byte
		switch end := p.size - 2; {
		case p.off < len(padPrefix):
			src = []byte(padPrefix[p.off:])
		case p.off < end:
			src = padXs[:min(len(padXs), end-p.off)]
		default:
			src = []byte(`"}`[p.off-end:])
		}
		c := copy(b[n:], src)
		n += c
		p.off += c
	}
	return n, nil
}

// postPad posts a generated body of size bytes, with Content-Length unless
// chunked.
func postPad(front string, size int, chunked bool) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, front+"/v1/completions", &padBody{size: size})
	if err != nil {
		return nil, err
	}
	if !chunked {
		req.ContentLength = int64(size)
	}
	return http.DefaultClient.Do(req)
}

// startActivator serves a on 127.0.0.1 with a.Server()'s timeouts.
func startActivator(t *testing.T, a *Activator) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := a.Server()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

func newLimitedActivator(t *testing.T, b http.Handler, mutate func(*Activator)) (*Activator, *fakeModelWaker, string) {
	t.Helper()
	be := &http.Server{Handler: b}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = be.Serve(ln) }()
	t.Cleanup(func() { _ = be.Close() })
	u, _ := url.Parse("http://" + ln.Addr().String())
	w := &fakeModelWaker{outcomes: []Outcome{{Result: ResultScaled, Variant: "l4"}}}
	a := &Activator{Backends: map[string]*url.URL{"meta/llama": u}, Waker: w, Metrics: NewMetrics(nil),
		MaxWait: 5 * time.Second, ProbeInterval: 20 * time.Millisecond}
	mutate(a)
	return NewActivator(a), w, startActivator(t, a)
}

func TestActivatorHeldRequestCap(t *testing.T) {
	b := &backend{}
	a, waker, front := newLimitedActivator(t, b, func(a *Activator) { a.MaxHeldRequests = 2 })
	codes := make(chan int, 2)
	for range 2 {
		go func() {
			resp, err := http.Post(front+"/v1/completions", "application/json", strings.NewReader(`{"model":"meta/llama"}`))
			if err != nil {
				codes <- 0
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	require.Eventually(t, func() bool { return a.held.Load() == 2 }, 5*time.Second, 10*time.Millisecond)

	resp := post(t, front, `{"model":"meta/llama"}`)
	body := readAll(t, resp)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, body)
	assert.Equal(t, "5", resp.Header.Get("Retry-After"))
	assert.Contains(t, body, "2 requests already wait for their model (--activator-max-held-requests)")
	assert.Equal(t, 3, waker.count(), "the refused request still woke its model")
	assert.Equal(t, 2.0, testutil.ToFloat64(a.Metrics.ActivatorHeld))

	b.ready.Store(true)
	assert.Equal(t, http.StatusOK, <-codes)
	assert.Equal(t, http.StatusOK, <-codes)
	assert.Equal(t, int64(0), a.held.Load())
	assert.Equal(t, 1.0, testutil.ToFloat64(a.Metrics.ActivatorReqs.WithLabelValues("overloaded")))
}

func TestActivatorBodyLimits(t *testing.T) {
	tests := []struct {
		name     string
		size     int
		chunked  bool
		occupied int // bytes already held by a waiting request
		want     int
		wantMsg  string
	}{
		{name: "fits", size: 1000, want: http.StatusOK},
		{name: "fits, chunked", size: 1000, chunked: true, want: http.StatusOK},
		{name: "over the body cap", size: 5000, want: http.StatusRequestEntityTooLarge, wantMsg: "request body over 4096 bytes (--activator-max-body-bytes)"},
		{name: "over the body cap, chunked", size: 5000, chunked: true, want: http.StatusRequestEntityTooLarge, wantMsg: "over 4096 bytes"},
		{name: "over the held bytes", size: 3000, occupied: 4000, want: http.StatusServiceUnavailable,
			wantMsg: "request bodies in memory would exceed 6144 bytes (--activator-max-held-bytes)"},
		{name: "over the held bytes, chunked", size: 3000, chunked: true, occupied: 4000, want: http.StatusServiceUnavailable,
			wantMsg: "would exceed 6144 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &backend{}
			a, _, front := newLimitedActivator(t, b, func(a *Activator) { a.MaxBodyBytes, a.MaxHeldBytes = 4096, 6144 })
			held := make(chan int, 1)
			if tt.occupied > 0 {
				go func() {
					resp, err := postPad(front, tt.occupied, false)
					if err != nil {
						held <- 0
						return
					}
					resp.Body.Close()
					held <- resp.StatusCode
				}()
				require.Eventually(t, func() bool { return a.held.Load() == 1 }, 5*time.Second, 10*time.Millisecond)
			} else {
				b.ready.Store(true)
			}
			resp, err := postPad(front, tt.size, tt.chunked)
			require.NoError(t, err)
			got := readAll(t, resp)
			assert.Equal(t, tt.want, resp.StatusCode, got)
			assert.Contains(t, got, tt.wantMsg)
			if tt.want == http.StatusServiceUnavailable {
				assert.Equal(t, "5", resp.Header.Get("Retry-After"))
			}
			if tt.occupied > 0 {
				b.ready.Store(true)
				assert.Equal(t, http.StatusOK, <-held)
			}
			assert.Eventually(t, func() bool { return a.heldBytes.Load() == 0 }, 5*time.Second, 10*time.Millisecond, "every reservation released")
			assert.LessOrEqual(t, a.peakBytes.Load(), int64(6144))
		})
	}
}

// TestActivatorHoldOutlivesReadTimeout: ReadTimeout bounds reading the
// request, not the hold; a held request is not cancelled when it passes.
func TestActivatorHoldOutlivesReadTimeout(t *testing.T) {
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked=%v", chunked), func(t *testing.T) {
			b := &backend{}
			_, _, front := newLimitedActivator(t, b, func(a *Activator) { a.ReadTimeout = 200 * time.Millisecond })
			time.AfterFunc(700*time.Millisecond, func() { b.ready.Store(true) })
			resp, err := postPad(front, 100, chunked)
			require.NoError(t, err)
			assert.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp))
		})
	}
}

// TestActivatorReleasesWhenClientLeaves: a client that gives up while its
// request is held frees its hold slot and body bytes at once, not at
// MaxWait.
func TestActivatorReleasesWhenClientLeaves(t *testing.T) {
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked=%v", chunked), func(t *testing.T) {
			a, _, front := newLimitedActivator(t, &backend{}, func(a *Activator) { a.MaxWait = time.Minute })
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, front+"/v1/completions", &padBody{size: 100})
			if !chunked {
				req.ContentLength = 100
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}()
			require.Eventually(t, func() bool { return a.held.Load() == 1 }, 5*time.Second, 10*time.Millisecond)
			cancel()
			<-done
			assert.Eventually(t, func() bool { return a.held.Load() == 0 && a.heldBytes.Load() == 0 }, 2*time.Second, 10*time.Millisecond)
		})
	}
}

func TestActivatorCutsOffSlowSender(t *testing.T) {
	b := &backend{}
	b.ready.Store(true)
	a, _, front := newLimitedActivator(t, b, func(a *Activator) { a.ReadTimeout = 300 * time.Millisecond })
	start := time.Now()
	// 64 KiB at 1 KiB per 50 ms would take 3 s.
	resp, err := http.Post(front+"/v1/completions", "application/json", &padBody{size: 64 << 10, chunk: 1024, delay: 50 * time.Millisecond})
	if err == nil {
		body := readAll(t, resp)
		assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode, body)
	}
	assert.Less(t, time.Since(start), 2*time.Second, "cut off at the read timeout, not after the whole upload")
	assert.Eventually(t, func() bool { return a.heldBytes.Load() == 0 }, 5*time.Second, 10*time.Millisecond)
}

// TestActivatorMemoryUnderLoad sends 200 concurrent 4 MiB requests (40 of
// them chunked and slow) at a model that wakes after a second, all on
// 127.0.0.1, and checks that the bodies in memory never exceed the held
// bytes cap and the heap stays under the 256Mi limit of the Deployment.
func TestActivatorMemoryUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	const (
		clients  = 200
		slow     = 40
		bodySize = 4 << 20
		heapCap  = 256 << 20
	)
	var backendBytes atomic.Int64
	b := &backend{}
	be := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			b.ServeHTTP(w, r)
			return
		}
		n, _ := io.Copy(io.Discard, r.Body)
		backendBytes.Add(n)
		_, _ = io.WriteString(w, `{"choices":[{"text":"hi"}]}`)
	})
	a, _, front := newLimitedActivator(t, be, func(a *Activator) {
		a.MaxWait, a.ReadTimeout = 20*time.Second, 5*time.Second // defaults otherwise: 4 MiB, 64 MiB, 100 held
	})
	require.Equal(t, int64(64<<20), a.MaxHeldBytes)
	time.AfterFunc(time.Second, func() { b.ready.Store(true) })

	runtime.GC()
	var peakHeap atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peakHeap.Load() {
				peakHeap.Store(ms.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
	var mu sync.Mutex
	outcomes := map[string]int{}
	var wg sync.WaitGroup
	start := time.Now()
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var body io.Reader = &padBody{size: bodySize}
			if i < slow {
				// 4 MiB at 64 KiB per 100 ms: longer than the 5 s read timeout.
				body = &padBody{size: bodySize, chunk: 64 << 10, delay: 100 * time.Millisecond}
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, front+"/v1/completions", body)
			if i >= slow {
				req.ContentLength = bodySize
			}
			key := ""
			resp, err := client.Do(req)
			switch {
			case err != nil:
				key = "client error (upload cut off)"
			default:
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				key = fmt.Sprint(resp.StatusCode)
				if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
					key = "503 without Retry-After"
				}
			}
			mu.Lock()
			outcomes[key]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stop)
	<-sampled
	require.NoError(t, ctx.Err(), "the load did not finish in time")

	t.Logf("%d clients (%d slow) x %d MiB in %s: outcomes %v; peak held bytes %.1f MiB (cap %d MiB); peak HeapInuse %.1f MiB; %.0f MiB reached the backend",
		clients, slow, bodySize>>20, elapsed.Round(time.Millisecond), outcomes, float64(a.peakBytes.Load())/(1<<20), a.MaxHeldBytes>>20,
		float64(peakHeap.Load())/(1<<20), float64(backendBytes.Load())/(1<<20))
	assert.LessOrEqual(t, a.peakBytes.Load(), a.MaxHeldBytes, "held bytes never exceed the cap")
	assert.Less(t, peakHeap.Load(), uint64(heapCap), "heap stays under the pod's 256Mi limit")
	assert.Positive(t, outcomes["200"], "some requests went through")
	assert.Zero(t, outcomes["503 without Retry-After"])
	for k := range outcomes {
		assert.Contains(t, []string{"200", "503", "408", "client error (upload cut off)"}, k)
	}
	// A client can see its upload cut off before the server's handler has
	// returned and released its reservation: wait for the handlers, then
	// every reservation must be back (a leak never comes back).
	assert.Eventually(t, func() bool { return a.heldBytes.Load() == 0 && a.held.Load() == 0 }, 10*time.Second, 10*time.Millisecond,
		"every reservation released")
	assert.False(t, errors.Is(ctx.Err(), context.DeadlineExceeded))
}
