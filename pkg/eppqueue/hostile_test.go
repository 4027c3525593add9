package eppqueue

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const protoDelimType = "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"

// validProtoBody is what a real client_golang registry encodes for two
// queue samples of model llama (2 + 5).
func validProtoBody(t testing.TB) []byte {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: Metric, Help: "h"}, []string{"target_model_name", "fairness_id"})
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

// FuzzParseQueue: no answer, in either format, plain or gzipped (as the
// HTTP client decompresses it), panics the parser, and what it returns is
// a usable queue within the bounds.
func FuzzParseQueue(f *testing.F) {
	valid := validProtoBody(f)
	f.Add(valid, true, false)
	f.Add(valid[:len(valid)-3], true, false)
	f.Add(binary.AppendUvarint(nil, 300<<30), true, false)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, true, false)
	f.Add([]byte(newNameBody), false, false)
	f.Add([]byte(`llm_d_epp_flow_control_queue_size{target_model_name="a"} NaN`+"\n"), false, false)
	f.Add([]byte(`llm_d_epp_flow_control_queue_size{target_model_name="a" 1`+"\n"), false, false)
	// Label-heavy samples, duplicate labels, escapes.
	f.Add([]byte(labelHeavyLine(MaxLabels+1)+labelHeavyLine(MaxLabels)+newNameBody), false, false)
	f.Add([]byte(labelHeavyLine(2000)), false, false)
	f.Add(protoQueue(protoMetric(1, labelPairs(2000)...)), true, false)
	f.Add([]byte(`llm_d_epp_flow_control_queue_size{target_model_name="a",target_model_name="b"} 1`+"\n"+
		`llm_d_epp_flow_control_queue_size{"target_model_name"="x\\\"\n", "odd"="1",} 2 1700000000000`+"\n"), false, false)
	// Gzipped: valid answers, many models, and a bomb over MaxBytes.
	f.Add(gzipped(f, []byte(newNameBody)), false, true)
	f.Add(gzipped(f, valid), true, true)
	f.Add(gzipped(f, manyModels(MaxModels+10)), false, true)
	f.Add(gzipped(f, make([]byte, MaxBytes+1)), false, true)
	f.Fuzz(func(t *testing.T, body []byte, proto, gz bool) {
		ct := "text/plain; version=0.0.4"
		if proto {
			ct = protoDelimType
		}
		var r io.Reader = bytes.NewReader(body)
		if gz {
			zr, err := gzip.NewReader(r)
			if err != nil {
				return
			}
			r = zr
		}
		q, skipped, err := Parse(context.Background(), r, ct)
		for reason, n := range skipped {
			assert.Contains(t, []string{SkipMalformed, SkipDuplicateLabel, SkipTooManyLabels, SkipModelTooLong, SkipValue}, reason)
			assert.Positive(t, n)
		}
		if err != nil {
			assert.True(t, strings.Contains(err.Error(), "metrics"), "error names what failed: %v", err)
			return
		}
		assert.LessOrEqual(t, len(q), MaxModels)
		for m, v := range q {
			assert.LessOrEqual(t, len(m), MaxModelBytes)
			if !(v >= 0) || math.IsInf(v, 0) {
				t.Fatalf("model %q: queue %v is not a finite number >= 0", m, v)
			}
		}
	})
}
