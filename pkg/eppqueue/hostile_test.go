package eppqueue

import (
	"bytes"
	"encoding/binary"
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

// FuzzParseQueue: no answer, in either format, panics the parser or makes
// it allocate far beyond its size, and what it returns is a usable queue.
func FuzzParseQueue(f *testing.F) {
	valid := validProtoBody(f)
	f.Add(valid, true)
	f.Add(valid[:len(valid)-3], true)
	f.Add(binary.AppendUvarint(nil, 300<<30), true)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, true)
	f.Add([]byte(newNameBody), false)
	f.Add([]byte(`llm_d_epp_flow_control_queue_size{target_model_name="a"} NaN`+"\n"), false)
	f.Add([]byte(`llm_d_epp_flow_control_queue_size{target_model_name="a" 1`+"\n"), false)
	f.Fuzz(func(t *testing.T, body []byte, proto bool) {
		ct := "text/plain; version=0.0.4"
		if proto {
			ct = protoDelimType
		}
		q, err := Parse(bytes.NewReader(body), ct)
		if err != nil {
			assert.True(t, strings.Contains(err.Error(), "metrics"), "error names what failed: %v", err)
			return
		}
		for m, v := range q {
			if !(v >= 0) || math.IsInf(v, 0) {
				t.Fatalf("model %q: queue %v is not a finite number >= 0", m, v)
			}
		}
	})
}
