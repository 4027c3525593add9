package scalefromzero

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const newNameBody = `# HELP go_goroutines Number of goroutines.
# TYPE go_goroutines gauge
go_goroutines 42
# HELP llm_d_epp_flow_control_queue_size Requests in the flow-control queue.
# TYPE llm_d_epp_flow_control_queue_size gauge
llm_d_epp_flow_control_queue_size{fairness_id="a",priority="0",inference_pool="p",model_name="llama",target_model_name="llama"} 2
llm_d_epp_flow_control_queue_size{fairness_id="b",priority="1",inference_pool="p",model_name="llama",target_model_name="llama"} 1
llm_d_epp_flow_control_queue_size{fairness_id="a",priority="0",inference_pool="p",model_name="lora-x",target_model_name="base"} 4
# HELP inference_extension_flow_control_queue_size Deprecated.
# TYPE inference_extension_flow_control_queue_size gauge
inference_extension_flow_control_queue_size{fairness_id="a",priority="0",inference_pool="p",model_name="llama",target_model_name="llama"} 99
`

// fakeEPP serves a /metrics body, optionally behind a bearer token, slowly,
// or with a status code.
type fakeEPP struct {
	mu       sync.Mutex
	body     string
	token    string
	delay    time.Duration
	status   int
	inFlight atomic.Int32
	maxSeen  atomic.Int32
	requests atomic.Int32
}

func (f *fakeEPP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for {
		m := f.maxSeen.Load()
		if n <= m || f.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	f.mu.Lock()
	body, token, delay, status := f.body, f.token, f.delay, f.status
	f.mu.Unlock()
	if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	select {
	case <-time.After(delay):
	case <-r.Context().Done():
		return
	}
	if status != 0 {
		http.Error(w, "boom", status)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write([]byte(body))
}

func (f *fakeEPP) set(fn func(*fakeEPP)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func TestScrapeResults(t *testing.T) {
	epp := &fakeEPP{body: newNameBody}
	srv := httptest.NewServer(epp)
	defer srv.Close()
	m := NewMetrics(nil)
	s := NewScraper(srv.Client(), 200*time.Millisecond, 4, m.observeScrape)
	ctx := context.Background()

	res := s.Scrape(ctx, srv.URL+"/metrics")
	require.NoError(t, res.Err)
	assert.Equal(t, 3.0, res.Queue.For("llama"))
	assert.False(t, res.At.IsZero())

	epp.set(func(f *fakeEPP) { f.body = "<html>\n<<garbage>>\n" })
	res = s.Scrape(ctx, srv.URL)
	require.NoError(t, res.Err, "a page without our families is an empty queue, not an error")
	assert.Empty(t, res.Queue)

	epp.set(func(f *fakeEPP) {
		f.body = `llm_d_epp_flow_control_queue_size{target_model_name="x"} {{{` + "\n" + newNameBody
	})
	res = s.Scrape(ctx, srv.URL)
	require.NoError(t, res.Err, "a bad sample is skipped, the others count")
	assert.Equal(t, 3.0, res.Queue.For("llama"))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.SamplesSkipped.WithLabelValues("malformed")))

	epp.set(func(f *fakeEPP) { f.body = "# " + strings.Repeat("x", 2<<20) + "\n" + newNameBody })
	res = s.Scrape(ctx, srv.URL)
	require.Error(t, res.Err)
	assert.Equal(t, "parse", errorReason(res.Err))

	epp.set(func(f *fakeEPP) { f.body, f.token = newNameBody, "s3cret" })
	res = s.Scrape(ctx, srv.URL)
	require.Error(t, res.Err)
	assert.Equal(t, "unauthorized", errorReason(res.Err))
	assert.Contains(t, res.Err.Error(), "HTTP 401")
	assert.Contains(t, res.Err.Error(), "--epp-bearer-token-file")

	epp.set(func(f *fakeEPP) { f.token, f.status = "", http.StatusInternalServerError })
	res = s.Scrape(ctx, srv.URL)
	assert.Equal(t, "http_status", errorReason(res.Err))

	epp.set(func(f *fakeEPP) { f.status, f.delay = 0, 2*time.Second })
	start := time.Now()
	res = s.Scrape(ctx, srv.URL)
	assert.Less(t, time.Since(start), time.Second, "the scrape timeout bounds a hung EPP")
	assert.Equal(t, "timeout", errorReason(res.Err))

	res = s.Scrape(ctx, "http://127.0.0.1:1/metrics")
	assert.Equal(t, "connection", errorReason(res.Err))

	for result, want := range map[string]float64{"ok": 3, "parse": 1, "unauthorized": 1, "http_status": 1, "timeout": 1, "connection": 1} {
		assert.Equal(t, want, testutil.ToFloat64(m.Scrapes.WithLabelValues(result)), result)
	}
}

func TestScrapeBearerToken(t *testing.T) {
	epp := &fakeEPP{body: newNameBody, token: "s3cret"}
	srv := httptest.NewTLSServer(epp)
	defer srv.Close()
	dir := t.TempDir()
	tokenFile := dir + "/token"
	require.NoError(t, writeFile(tokenFile, "s3cret\n"))
	o := NewOptions()
	o.EPPScheme, o.EPPCAFile, o.EPPBearerTokenFile = "https", certFile(t, srv), tokenFile
	client, err := eppClient(o)
	require.NoError(t, err)
	res := NewScraper(client, time.Second, 1, nil).Scrape(context.Background(), srv.URL)
	require.NoError(t, res.Err)
	assert.Equal(t, 3.0, res.Queue.For("llama"))
}

func TestLaunchBoundsConcurrency(t *testing.T) {
	epp := &fakeEPP{body: newNameBody, delay: 100 * time.Millisecond}
	srv := httptest.NewServer(epp)
	defer srv.Close()
	s := NewScraper(srv.Client(), time.Second, 2, nil)
	ctx := context.Background()
	var wg sync.WaitGroup
	var got atomic.Int32
	for i := range 6 {
		wg.Add(1)
		require.True(t, s.Launch(ctx, srv.URL+"/?ep="+string(rune('a'+i)), func(r ScrapeResult) {
			if r.Err == nil {
				got.Add(1)
			}
			wg.Done()
		}))
	}
	// A second launch for an endpoint still being scraped is refused.
	assert.False(t, s.Launch(ctx, srv.URL+"/?ep=a", func(ScrapeResult) { t.Error("duplicate scrape ran") }))
	wg.Wait()
	assert.Equal(t, int32(6), got.Load())
	assert.Equal(t, int32(2), epp.maxSeen.Load(), "at most --max-concurrent-scrapes in flight")
	assert.True(t, s.Launch(ctx, srv.URL+"/?ep=a", func(ScrapeResult) {}), "a finished endpoint can be scraped again")
}
