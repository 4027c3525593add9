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
	"runtime"
	"runtime/debug"
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
	prefix    string // default padPrefix
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
	prefix := p.prefix
	if prefix == "" {
		prefix = padPrefix
	}
	n := 0
	for n < len(b) && p.off < p.size {
		var src []byte
		switch end := p.size - 2; {
		case p.off < len(prefix):
			src = []byte(prefix[p.off:])
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

// startActivator serves a on 127.0.0.1 as Run does: a.Server() on
// a.Listener.
func startActivator(t *testing.T, a *Activator) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := a.Server()
	go func() { _ = srv.Serve(a.Listener(ln)) }()
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
	stopSampling := samplePeak(10*time.Millisecond, heapInuse)

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
	peakHeap := stopSampling()
	require.NoError(t, ctx.Err(), "the load did not finish in time")

	t.Logf("%d clients (%d slow) x %d MiB in %s: outcomes %v; peak held bytes %.1f MiB (cap %d MiB); peak HeapInuse %.1f MiB; %.0f MiB reached the backend",
		clients, slow, bodySize>>20, elapsed.Round(time.Millisecond), outcomes, float64(a.peakBytes.Load())/(1<<20), a.MaxHeldBytes>>20,
		float64(peakHeap)/(1<<20), float64(backendBytes.Load())/(1<<20))
	assert.LessOrEqual(t, a.peakBytes.Load(), a.MaxHeldBytes, "held bytes never exceed the cap")
	assert.Less(t, peakHeap, uint64(heapCap), "heap stays under the pod's 256Mi limit")
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

// rawConn opens a connection to the activator at front and writes raw
// (an unfinished request); the connection stays open until the test ends.
func rawConn(t *testing.T, front string, raw ...[]byte) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(front, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	for _, b := range raw {
		_, err = c.Write(b)
		require.NoError(t, err)
	}
	return c
}

// TestActivatorHeaderBytes: headers are capped by --activator-max-header-bytes
// (the net/http default is 1 MB), and those of a request being served count
// against the held bytes with its body.
func TestActivatorHeaderBytes(t *testing.T) {
	tests := []struct {
		name    string
		header  int // bytes of one X-Pad header
		body    int
		want    int
		wantMsg string
	}{
		{name: "small headers", header: 100, body: 3500, want: http.StatusOK},
		{name: "headers fill the held bytes", header: 3000, body: 3500, want: http.StatusServiceUnavailable,
			wantMsg: "request bodies in memory would exceed 6144 bytes (--activator-max-held-bytes)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &backend{}
			b.ready.Store(true)
			a, _, front := newLimitedActivator(t, b, func(a *Activator) { a.MaxBodyBytes, a.MaxHeldBytes = 4096, 6144 })
			req, err := http.NewRequest(http.MethodPost, front+"/v1/completions", &padBody{size: tt.body})
			require.NoError(t, err)
			req.ContentLength = int64(tt.body)
			req.Header.Set("X-Pad", strings.Repeat("h", tt.header))
			resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
			require.NoError(t, err)
			got := readAll(t, resp)
			assert.Equal(t, tt.want, resp.StatusCode, got)
			assert.Contains(t, got, tt.wantMsg)
			assert.Eventually(t, func() bool { return a.heldBytes.Load() == 0 }, 5*time.Second, 10*time.Millisecond)
		})
	}
	t.Run("over the header cap", func(t *testing.T) {
		b := &backend{}
		b.ready.Store(true)
		a, _, front := newLimitedActivator(t, b, func(*Activator) {})
		require.Equal(t, 16<<10, a.MaxHeaderBytes, "the default")
		// net/http reads up to 4 KiB past the cap before answering 431.
		c := rawConn(t, front, []byte("POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\nX-Pad: "+
			strings.Repeat("h", a.MaxHeaderBytes+8<<10)+"\r\n\r\n"))
		require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
	})
}

// TestActivatorConnectionCap: beyond --activator-max-connections a new
// connection is not served until one closes.
func TestActivatorConnectionCap(t *testing.T) {
	b := &backend{}
	b.ready.Store(true)
	_, _, front := newLimitedActivator(t, b, func(a *Activator) { a.MaxConnections = 2 })
	first := rawConn(t, front, []byte("POST /v1/completions HTTP/1.1\r\nHost: a\r\n"))
	rawConn(t, front, []byte("POST /v1/completions HTTP/1.1\r\nHost: a\r\n"))

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 500 * time.Millisecond}
	_, err := client.Post(front+"/v1/completions", "application/json", strings.NewReader(`{"model":"meta/llama"}`))
	require.Error(t, err, "a third connection is not served while two are open")

	require.NoError(t, first.Close())
	client.Timeout = 5 * time.Second
	resp, err := client.Post(front+"/v1/completions", "application/json", strings.NewReader(`{"model":"meta/llama"}`))
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp))
}

// slowUpload is the start of a request that declares a 4 MiB body and sends
// 13 bytes of it.
var slowUpload = []byte("POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: 4194304\r\n\r\n{\"model\":\"me")

// TestActivatorSlowUploadsDoNotLockOut: 16 clients that declare 4 MiB and
// send 13 bytes reserve what they sent (rounded up), not the 64 MiB of the
// default held bytes; everyone else is still served.
func TestActivatorSlowUploadsDoNotLockOut(t *testing.T) {
	b := &backend{}
	b.ready.Store(true)
	a, _, front := newLimitedActivator(t, b, func(*Activator) {})
	require.Equal(t, int64(64<<20), a.MaxHeldBytes)
	for range 16 {
		rawConn(t, front, slowUpload)
	}
	require.Eventually(t, func() bool { return a.heldBytes.Load() >= 16*firstChunk }, 5*time.Second, 10*time.Millisecond)
	time.Sleep(100 * time.Millisecond) // every slow client's reservation is made

	resp := post(t, front, `{"model":"meta/llama"}`)
	assert.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp))
	assert.LessOrEqual(t, a.heldBytes.Load(), int64(16*(firstChunk+256)), "each slow client holds its first chunk and headers")
}

// TestActivatorModelShare: requests for a model that never becomes ready
// take at most its share of the held caps; another model's requests are
// still held and forwarded.
func TestActivatorModelShare(t *testing.T) {
	tests := []struct {
		name     string
		mutate   func(*Activator)
		requests int // for the model that never becomes ready
		size     int
		wantMsg  string
	}{
		{name: "held requests", mutate: func(a *Activator) { a.MaxHeldRequests = 4 }, requests: 4, size: 100,
			wantMsg: `2 requests already wait for model "never" (--activator-max-held-requests-per-model)`},
		{name: "held bytes", mutate: func(a *Activator) { a.MaxBodyBytes, a.MaxHeldBytes = 4096, 16384 }, requests: 5, size: 3000,
			wantMsg: `requests waiting for model "never" would hold over 8192 bytes (--activator-max-held-bytes-per-model)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			never := httptest.NewServer(&backend{})
			t.Cleanup(never.Close)
			nu, _ := url.Parse(never.URL)
			b := &backend{}
			a, _, front := newLimitedActivator(t, b, func(a *Activator) {
				a.Backends["never"] = nu
				tt.mutate(a)
			})
			bodyFor := func(model string) string {
				prefix := `{"model":"` + model + `","pad":"`
				return prefix + strings.Repeat("x", tt.size-len(prefix)-2) + `"}`
			}
			refused := make(chan string, tt.requests)
			for range tt.requests {
				go func() {
					resp, err := http.Post(front+"/v1/completions", "application/json", strings.NewReader(bodyFor("never")))
					if err != nil {
						return
					}
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusServiceUnavailable {
						refused <- string(body)
					}
				}()
			}
			// Every request for "never" is either held or refused.
			require.Eventually(t, func() bool { return admitted(a, "never")+int64(len(refused)) == int64(tt.requests) }, 5*time.Second, 10*time.Millisecond)
			time.AfterFunc(200*time.Millisecond, func() { b.ready.Store(true) })
			resp := post(t, front, bodyFor("meta/llama"))
			assert.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp))
			assert.Equal(t, int64(2), admitted(a, "never"), "the model that never becomes ready holds its share")
			require.Len(t, refused, tt.requests-2)
			var e apiError
			require.NoError(t, json.Unmarshal([]byte(<-refused), &e))
			assert.Equal(t, tt.wantMsg, e.Error.Message)
		})
	}
}

// TestActivatorWorstClients fills every default bound of the activator at
// once on 127.0.0.1 (real server, default caps): connections up to
// --activator-max-connections, most of them stalled in headers just under
// --activator-max-header-bytes, 16 stalled uploads that declare 4 MiB, and
// 100 requests of 4 MiB for a model that never becomes ready. With the
// Deployment's GOMEMLIMIT, the heap and goroutine stacks of the whole
// process (attackers included) stay under peakCap, the memory still in use
// once the attack stands (after a GC) under liveCap, and a request for a
// ready model is answered during the attack.
func TestActivatorWorstClients(t *testing.T) {
	const (
		slowUploads   = 16
		neverRequests = 100
		bodySize      = 4 << 20
		spare         = 8 // connections left for the well-behaved client
		memLimit      = 200 << 20
		peakCap       = memLimit
		liveCap       = 96 << 20
	)
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(memLimit)) // GOMEMLIMIT=200MiB, as deploy/scale-from-zero
	never := httptest.NewServer(&backend{})
	t.Cleanup(never.Close)
	nu, _ := url.Parse(never.URL)
	b := &backend{}
	b.ready.Store(true)
	a, _, front := newLimitedActivator(t, b, func(a *Activator) {
		a.Backends["never"] = nu
		a.MaxWait = 30 * time.Second
	})
	headerConns := a.MaxConnections - slowUploads - neverRequests - spare
	require.Equal(t, 1024, a.MaxConnections, "the default")

	runtime.GC()
	stopSampling := samplePeak(10*time.Millisecond, heapAndStackInuse)

	// Headers just under the cap: half as one long line, half as many
	// short ones (a map entry each).
	long := []byte("POST /v1/completions HTTP/1.1\r\nHost: a\r\nX-Pad: " + strings.Repeat("a", a.MaxHeaderBytes-200))
	short := []byte("POST /v1/completions HTTP/1.1\r\nHost: a\r\n")
	for i := 0; len(short) < a.MaxHeaderBytes-300; i++ {
		short = fmt.Appendf(short, "X-Pad-%d: %s\r\n", i, strings.Repeat("a", 40))
	}
	attackers := make(chan error, headerConns+slowUploads)
	for i := range headerConns + slowUploads {
		go func() {
			c, err := net.Dial("tcp", strings.TrimPrefix(front, "http://"))
			if err != nil {
				attackers <- err
				return
			}
			t.Cleanup(func() { _ = c.Close() })
			switch {
			case i < slowUploads:
				_, err = c.Write(slowUpload)
			case i%2 == 0:
				_, err = c.Write(long)
			default:
				_, err = c.Write(short)
			}
			attackers <- err
		}()
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
	neverCodes := make(chan int, neverRequests)
	for range neverRequests {
		go func() {
			req, _ := http.NewRequest(http.MethodPost, front+"/v1/completions", &padBody{size: bodySize, prefix: `{"model":"never","pad":"`})
			req.ContentLength = bodySize
			resp, err := client.Do(req)
			if err != nil {
				neverCodes <- 0
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			neverCodes <- resp.StatusCode
		}()
	}
	for range headerConns + slowUploads {
		require.NoError(t, <-attackers)
	}
	// The model that never becomes ready holds its share (32 MiB of 64);
	// its other requests are refused.
	refused := 0
	require.Eventually(t, func() bool {
		// Refused while uploading: 503, or the connection closed under
		// the upload.
		for len(neverCodes) > 0 {
			code := <-neverCodes
			require.Contains(t, []int{http.StatusServiceUnavailable, 0}, code)
			refused++
		}
		return admitted(a, "never")+int64(refused) == neverRequests
	}, 20*time.Second, 10*time.Millisecond)
	assert.Equal(t, a.MaxHeldBytesPerModel/(bodySize+256), admitted(a, "never"), "the model's share of the held bytes is full")
	time.Sleep(200 * time.Millisecond) // the server has read what the attackers sent
	runtime.GC()
	var live runtime.MemStats
	runtime.ReadMemStats(&live)

	good := time.Now()
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}).
		Post(front+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"meta/llama","messages":[]}`))
	require.NoError(t, err, "a well-behaved request during the attack")
	assert.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp))
	goodLatency := time.Since(good)
	peak := stopSampling()

	t.Logf("%d connections: %d stalled in %d KiB of headers, %d uploads stalled after 13 of 4096 KiB, %d x 4 MiB for a model never ready (%d held, %d refused); "+
		"peak held bytes %.1f MiB (cap %d MiB); peak HeapInuse+StackInuse %.1f MiB; in use once the attack stands %.1f MiB (%.1f MiB held); well-behaved request answered in %s",
		a.MaxConnections-spare, headerConns, a.MaxHeaderBytes>>10, slowUploads, neverRequests, admitted(a, "never"), refused,
		float64(a.peakBytes.Load())/(1<<20), a.MaxHeldBytes>>20, float64(peak)/(1<<20),
		float64(live.HeapInuse+live.StackInuse)/(1<<20), float64(a.heldBytes.Load())/(1<<20), goodLatency.Round(time.Millisecond))
	assert.LessOrEqual(t, a.peakBytes.Load(), a.MaxHeldBytes)
	assert.Less(t, peak, uint64(peakCap), "heap and stacks stay under GOMEMLIMIT")
	assert.Less(t, live.HeapInuse+live.StackInuse, uint64(liveCap), "memory in use while the attack stands")
	assert.Less(t, goodLatency, 2*time.Second)
}

// admitted is how many requests wait for model within its share. The
// global count (held) also has, for an instant, each request on its way to
// being refused by the model's share: counted there, a request about to
// get its 503 read as one more held.
func admitted(a *Activator, model string) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if m := a.waiting[model]; m != nil {
		return m.requests
	}
	return 0
}
