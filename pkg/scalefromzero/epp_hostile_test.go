package scalefromzero

import (
	"bytes"
	"context"
	"encoding/binary"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
		wantErr     string
		want        eppqueue.Queue
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", tt.contentType)
				_, _ = w.Write(tt.body)
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
			}
			if len(tt.body) < 1<<20 {
				// Small answers cost little, whatever length they declare.
				assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(8<<20), "bytes allocated for a %d-byte answer", len(tt.body))
			}
		})
	}
}
