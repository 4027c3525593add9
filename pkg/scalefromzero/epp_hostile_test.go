package scalefromzero

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/eppqueue"
)

const protoDelimType = "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"

// validProtoBody (also in eppqueue's tests: test helpers do not cross
// packages) is what a real client_golang registry encodes for two
// queue samples of model llama (2 + 5).
func validProtoBody(t testing.TB) []byte {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: eppqueue.Metric, Help: "h"}, []string{"target_model_name", "fairness_id"})
	reg.MustRegister(g)
	g.WithLabelValues("llama", "a").Set(2)
	g.WithLabelValues("llama", "b").Set(5)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeProtoDelim))
	for _, mf := range mfs {
		require.NoError(t, enc.Encode(mf))
	}
	return buf.Bytes()
}

// A hostile or broken EPP answer is an error for that EPP; it never makes
// the process allocate what the answer merely declares.
func TestScrapeHostileBodies(t *testing.T) {
	valid := validProtoBody(t)
	huge := binary.AppendUvarint(nil, 300<<30) // 300 GiB declared
	huge = append(huge, 'x')
	overCap := binary.AppendUvarint(nil, eppqueue.MaxBytes)
	overCap = append(overCap, make([]byte, eppqueue.MaxBytes)...)
	tests := []struct {
		name        string
		contentType string
		body        []byte
		gzip        bool // sent with Content-Encoding: gzip, which the client undoes
		wantErr     string
		want        eppqueue.Queue
		wantSkipped eppqueue.Skipped
	}{
		{name: "valid protobuf", contentType: protoDelimType, body: valid, want: eppqueue.Queue{"llama": 7}},
		{name: "valid text", contentType: "text/plain; version=0.0.4", body: []byte(newNameBody), want: eppqueue.Queue{"llama": 3, "base": 4}},
		{name: "7 bytes declaring 300 GiB", contentType: protoDelimType, body: huge,
			wantErr: "message declares 322122547200 bytes, at most 16777216 accepted"},
		{name: "length just over the cap", contentType: protoDelimType, body: binary.AppendUvarint(nil, eppqueue.MaxBytes+1),
			wantErr: "at most 16777216 accepted"},
		{name: "truncated message", contentType: protoDelimType, body: valid[:len(valid)-3], wantErr: "truncated message"},
		{name: "truncated length", contentType: protoDelimType, body: []byte{0xff}, wantErr: "truncated message length"},
		{name: "varint overflow", contentType: protoDelimType, body: bytes.Repeat([]byte{0xff}, 11), wantErr: "decode protobuf metrics"},
		{name: "garbage message", contentType: protoDelimType, body: []byte("\x05\xff\xff\xff\xff\xff"), wantErr: "decode protobuf metrics"},
		{name: "valid then garbage", contentType: protoDelimType, body: append(append([]byte{}, valid...), "\x03abc"...), wantErr: "decode protobuf metrics"},
		{name: "protobuf answer over the cap", contentType: protoDelimType, body: overCap, wantErr: "answer over 16777216 bytes"},
		{name: "text answer over the cap", contentType: "text/plain; version=0.0.4",
			body: bytes.Repeat([]byte("# filler comment line\n"), eppqueue.MaxBytes/20), wantErr: "answer over 16777216 bytes"},
		{name: "text line over 1 MiB", contentType: "text/plain; version=0.0.4",
			body: append([]byte(eppqueue.Metric+`{target_model_name="`), bytes.Repeat([]byte("a"), 2<<20)...), wantErr: "a line is over 1 MiB"},
		{name: "8,000 labels in one sample", contentType: "text/plain; version=0.0.4", body: []byte(labelHeavyLine(8000) + newNameBody),
			want: eppqueue.Queue{"llama": 3, "base": 4}, wantSkipped: eppqueue.Skipped{eppqueue.SkipTooManyLabels: 1}},
		{name: "duplicate label in one sample", contentType: "text/plain; version=0.0.4",
			body: []byte(eppqueue.Metric + `{target_model_name="x",priority="0",priority="1"} 9` + "\n" + newNameBody),
			want: eppqueue.Queue{"llama": 3, "base": 4}, wantSkipped: eppqueue.Skipped{eppqueue.SkipDuplicateLabel: 1}},
		{name: "gzipped 16 MiB of distinct models", contentType: "text/plain; version=0.0.4", gzip: true, body: distinctModels(eppqueue.MaxBytes - 100),
			wantErr: "has over 2048 models"},
		{name: "gzip bomb over the cap", contentType: "text/plain; version=0.0.4", gzip: true, body: bytes.Repeat([]byte("#\n"), eppqueue.MaxBytes/2+1),
			wantErr: "answer over 16777216 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := tt.body
			if tt.gzip {
				body = gzipped(t, body)
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", tt.contentType)
				if tt.gzip {
					w.Header().Set("Content-Encoding", "gzip")
				}
				_, _ = w.Write(body)
			}))
			defer srv.Close()
			s := NewScraper(srv.Client(), 10*time.Second, 1, nil)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			res := s.Scrape(context.Background(), srv.URL+"/metrics")
			runtime.ReadMemStats(&after)
			if tt.wantErr != "" {
				require.Error(t, res.Err)
				assert.Contains(t, res.Err.Error(), tt.wantErr)
				assert.Equal(t, "parse", errorReason(res.Err))
				assert.Nil(t, res.Queue)
			} else {
				require.NoError(t, res.Err)
				assert.Equal(t, tt.want, res.Queue)
				if tt.wantSkipped == nil {
					tt.wantSkipped = eppqueue.Skipped{}
				}
				assert.Equal(t, tt.wantSkipped, res.Skipped)
			}
			if len(body) < 1<<20 {
				// Small answers cost little, whatever length they declare.
				assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(8<<20), "bytes allocated for a %d-byte answer", len(body))
			}
		})
	}
}

// labelHeavyLine is one queue sample of model m with n labels in all.
func labelHeavyLine(n int) string {
	var b strings.Builder
	b.WriteString(eppqueue.Metric + `{target_model_name="m"`)
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, `,l%d="v"`, i)
	}
	b.WriteString("} 1\n")
	return b.String()
}

// distinctModels is about size bytes of queue samples, each of its own model.
func distinctModels(size int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "%s{target_model_name=\"model-%07d\"} 1\n", eppqueue.Metric, i)
	}
	return b.Bytes()
}

// worstAnswer is the costliest answer within eppqueue's bounds: a line of
// MaxLineBytes, then MaxModels-1 models with names of MaxModelBytes
// repeated up to MaxBytes.
func worstAnswer() []byte {
	var b bytes.Buffer
	b.WriteString("# " + strings.Repeat("c", eppqueue.MaxLineBytes-10) + "\n")
	name := strings.Repeat("n", eppqueue.MaxModelBytes-8)
	for i := 0; b.Len() < eppqueue.MaxBytes-2048; i++ {
		fmt.Fprintf(&b, "%s{target_model_name=\"%s%08d\",fairness_id=\"f\"} 1\n", eppqueue.Metric, name, i%(eppqueue.MaxModels-1))
	}
	return b.Bytes()
}

func gzipped(t *testing.T, b []byte) []byte {
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	_, err := zw.Write(b)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return out.Bytes()
}

// A sample with 8,000 labels costs 5 CPU-seconds to parse; parsed after
// the read, outside the deadline, it would hold its scrape slot. It is
// skipped and counted, and the scrape ends well within its timeout.
func TestScrapeLabelHeavyAnswerWithinDeadline(t *testing.T) {
	body := []byte(labelHeavyLine(8000) + newNameBody)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	m := NewMetrics(nil)
	const timeout = time.Second
	s := NewScraper(srv.Client(), timeout, 1, m.observeScrape)
	start := time.Now()
	res := s.Scrape(context.Background(), srv.URL)
	took := time.Since(start)
	require.NoError(t, res.Err)
	assert.Equal(t, 3.0, res.Queue.For("llama"))
	// Bounded by the timeout, not by a wall-clock figure a loaded CI
	// machine may miss: parsing the labels costs seconds.
	assert.Less(t, took, timeout)
	assert.Equal(t, 1.0, testutil.ToFloat64(m.SamplesSkipped.WithLabelValues(eppqueue.SkipTooManyLabels)))
}

// Parsing runs under the scrape deadline: an answer still being parsed
// when it passes is a timeout, and the scrape returns then.
func TestScrapeParseCountsAgainstDeadline(t *testing.T) {
	line := []byte(eppqueue.Metric + `{target_model_name="m"} 1` + "\n")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		// Valid samples, 64 KiB a millisecond at most: the cap is
		// reached no sooner than 256ms, after the deadline.
		chunk := bytes.Repeat(line, (64<<10)/len(line))
		for {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			time.Sleep(time.Millisecond)
		}
	}))
	defer srv.Close()
	s := NewScraper(srv.Client(), 100*time.Millisecond, 1, nil)
	start := time.Now()
	res := s.Scrape(context.Background(), srv.URL)
	took := time.Since(start)
	require.Error(t, res.Err)
	assert.Equal(t, "timeout", errorReason(res.Err), "%v", res.Err)
	assert.Less(t, took, 600*time.Millisecond)
}

// Memory: --max-concurrent-scrapes (16) scrapes of the worst gzipped
// answer within the bounds at once stay far under the pod's 256Mi.
func TestConcurrentScrapesMemoryBounded(t *testing.T) {
	const scrapes = 16
	body := gzipped(t, worstAnswer())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	s := NewScraper(srv.Client(), 30*time.Second, scrapes, nil)

	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	stopSampling := samplePeak(2*time.Millisecond, heapAlloc)
	var wg sync.WaitGroup
	for i := range scrapes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := s.Scrape(context.Background(), fmt.Sprintf("%s/?ep=%d", srv.URL, i))
			assert.NoError(t, res.Err)
			assert.Len(t, res.Queue, eppqueue.MaxModels-1)
		}()
	}
	wg.Wait()
	peak := stopSampling()
	grew := float64(peak-min(peak, base.HeapAlloc)) / (1 << 20)
	t.Logf("%d concurrent scrapes of a %d-byte gzipped answer (%d bytes decompressed): peak heap +%.1f MiB", scrapes, len(body), len(worstAnswer()), grew)
	assert.Less(t, grew, 64.0, "MiB of heap over the baseline")
}
