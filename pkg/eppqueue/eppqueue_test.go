package eppqueue

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
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

func TestParseQueue(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    Queue
		skipped Skipped
		wantErr string
	}{
		{name: "new name, summed over fairness and priority; target_model_name preferred", body: newNameBody,
			want: Queue{"llama": 3, "base": 4}},
		{name: "legacy name only, model_name fallback", body: `# TYPE inference_extension_flow_control_queue_size gauge
inference_extension_flow_control_queue_size{fairness_id="a",model_name="llama"} 5
inference_extension_flow_control_queue_size{fairness_id="b",model_name="llama",target_model_name=""} 1
`, want: Queue{"llama": 6}},
		{name: "new family declared without samples: legacy used", body: `# TYPE llm_d_epp_flow_control_queue_size gauge
inference_extension_flow_control_queue_size{target_model_name="llama"} 2
`, want: Queue{"llama": 2}},
		{name: "no model label: counts for any model", body: `inference_extension_flow_control_queue_size{inference_pool="p"} 3
`, want: Queue{AnyModel: 3}},
		{name: "NaN, Inf, negative and absurd dropped", body: `llm_d_epp_flow_control_queue_size{target_model_name="a"} NaN
llm_d_epp_flow_control_queue_size{target_model_name="e"} 1e308
llm_d_epp_flow_control_queue_size{target_model_name="e"} 1e308
llm_d_epp_flow_control_queue_size{target_model_name="b"} +Inf
llm_d_epp_flow_control_queue_size{target_model_name="c"} -2
llm_d_epp_flow_control_queue_size{target_model_name="d"} 1
`, want: Queue{"d": 1}, skipped: Skipped{SkipValue: 5}},
		{name: "no queue metric at all", body: "go_goroutines 3\n", want: Queue{}},
		{name: "garbage elsewhere is ignored", body: "<html>not metrics</html>\n" + newNameBody, want: Queue{"llama": 3, "base": 4}},
		// One bad sample is skipped and counted; the others still count.
		{name: "garbage in our family", body: `llm_d_epp_flow_control_queue_size{target_model_name="a" 1` + "\n" + newNameBody,
			want: Queue{"llama": 3, "base": 4}, skipped: Skipped{SkipMalformed: 1}},
		{name: "non-numeric value", body: `llm_d_epp_flow_control_queue_size{target_model_name="a"} lots` + "\n" + newNameBody,
			want: Queue{"llama": 3, "base": 4}, skipped: Skipped{SkipMalformed: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, skipped, err := Parse(context.Background(), strings.NewReader(tt.body), "text/plain; version=0.0.4")
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, q)
			if tt.skipped == nil {
				tt.skipped = Skipped{}
			}
			assert.Equal(t, tt.skipped, skipped)
		})
	}
}

func TestQueueFor(t *testing.T) {
	q := Queue{"llama": 2, AnyModel: 1}
	assert.Equal(t, 3.0, q.For("llama"))
	assert.Equal(t, 1.0, q.For("other"))
	assert.Equal(t, 0.0, Queue{}.For("llama"))
}

func TestParseQueueProtobuf(t *testing.T) {
	// A real client_golang exporter asked for protobuf.
	reg := prometheus.NewRegistry()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: Metric, Help: "h"}, []string{"target_model_name", "fairness_id"})
	reg.MustRegister(g)
	g.WithLabelValues("llama", "a").Set(2)
	g.WithLabelValues("llama", "b").Set(5)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Accept", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Contains(t, resp.Header.Get("Content-Type"), "protobuf")
	q, skipped, err := Parse(context.Background(), resp.Body, resp.Header.Get("Content-Type"))
	require.NoError(t, err)
	assert.Equal(t, Queue{"llama": 7}, q)
	assert.Empty(t, skipped)
}

func TestFamilyKeepsOnlyExactNames(t *testing.T) {
	tests := []struct {
		line    string
		wantFam int
	}{
		{"llm_d_epp_flow_control_queue_size_total 1", -1},
		{"llm_d_epp_flow_control_queue_size 2", 0},
		{`llm_d_epp_flow_control_queue_size{a="b"} 3`, 0},
		{`  inference_extension_flow_control_queue_size{a="b"} 3`, 1},
		{"# TYPE llm_d_epp_flow_control_queue_size gauge", -1},
		{"llm_d_epp_flow_control_queue_bytes 4", -1},
	}
	for _, tt := range tests {
		fam, _ := family([]byte(tt.line))
		assert.Equal(t, tt.wantFam, fam, tt.line)
	}
}
