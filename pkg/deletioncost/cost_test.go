package deletioncost

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	"github.com/wva-project/wva/pkg/collector"
)

func TestCosts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ready   []string
		running map[string]float64
		want    map[string]*int32
	}{
		{name: "idle pod cheapest", ready: []string{"a", "b", "c"}, running: map[string]float64{"a": 7, "b": 0, "c": 3},
			want: map[string]*int32{"a": ptr.To[int32](7), "b": ptr.To[int32](0), "c": ptr.To[int32](3)}},
		{name: "rounded", ready: []string{"a", "b"}, running: map[string]float64{"a": 2.4, "b": 2.6},
			want: map[string]*int32{"a": ptr.To[int32](2), "b": ptr.To[int32](3)}},
		{name: "no sample: no annotation", ready: []string{"a", "b"}, running: map[string]float64{"a": 5},
			want: map[string]*int32{"a": ptr.To[int32](5), "b": nil}},
		{name: "bad samples: no annotation", ready: []string{"nan", "neg", "inf"},
			running: map[string]float64{"nan": math.NaN(), "neg": -1, "inf": math.Inf(1)},
			want:    map[string]*int32{"nan": nil, "neg": nil, "inf": nil}},
		{name: "capped at int32", ready: []string{"a"}, running: map[string]float64{"a": 1e12},
			want: map[string]*int32{"a": ptr.To[int32](math.MaxInt32)}},
		{name: "pods not Ready are not annotated", ready: []string{"a"}, running: map[string]float64{"a": 1, "pending": 0},
			want: map[string]*int32{"a": ptr.To[int32](1)}},
		{name: "no Ready pods", running: map[string]float64{"a": 1}, want: map[string]*int32{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Costs(tc.ready, tc.running))
		})
	}
}

func TestRunningQuery(t *testing.T) {
	l := collector.DefaultLabels()
	assert.Equal(t, `max by (namespace, pod) ({__name__=~"vllm:num_requests_running|sglang:num_running_reqs"})`, RunningQuery(l, nil))
	assert.Equal(t, `max by (namespace, pod) ({__name__=~"vllm:num_requests_running|sglang:num_running_reqs",namespace=~"a\\.b|prod"})`, RunningQuery(l, []string{"prod", "a.b"}))
	assert.Equal(t, `max by (ns, kpod) ({__name__=~"vllm:num_requests_running|sglang:num_running_reqs",ns=~"x"})`, RunningQuery(collector.Labels{Namespace: "ns", Pod: "kpod"}, []string{"x"}))
}

type fakeQuerier struct {
	value model.Value
	err   error
	query string
	at    time.Time
}

func (f *fakeQuerier) Query(_ context.Context, q string, ts time.Time, _ ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error) {
	f.query, f.at = q, ts
	return f.value, nil, nil, f.err
}

func TestRequestsRunning(t *testing.T) {
	at := time.Unix(1700000000, 0)
	sample := func(ns, pod string, v float64) *model.Sample {
		m := model.Metric{}
		if ns != "" {
			m["namespace"] = model.LabelValue(ns)
		}
		if pod != "" {
			m["pod"] = model.LabelValue(pod)
		}
		return &model.Sample{Metric: m, Value: model.SampleValue(v)}
	}
	q := &fakeQuerier{value: model.Vector{sample("prod", "a", 3), sample("prod", "b", 0), sample("prod", "", 9), sample("dev", "a", 1)}}
	got, err := Prometheus{API: q, Labels: collector.DefaultLabels()}.RequestsRunning(context.Background(), []string{"prod", "dev"}, at)
	require.NoError(t, err)
	assert.Equal(t, map[collector.PodKey]float64{{Namespace: "prod", Pod: "a"}: 3, {Namespace: "prod", Pod: "b"}: 0, {Namespace: "dev", Pod: "a"}: 1}, got)
	assert.Equal(t, at, q.at)
	assert.Equal(t, RunningQuery(collector.DefaultLabels(), []string{"dev", "prod"}), q.query)

	_, err = Prometheus{API: &fakeQuerier{err: errors.New("down")}, Labels: collector.DefaultLabels()}.RequestsRunning(context.Background(), nil, at)
	var qe *collector.QueryError
	require.ErrorAs(t, err, &qe)
	assert.Equal(t, QueryRequestsRunning, qe.Query)

	_, err = Prometheus{API: &fakeQuerier{value: &model.Scalar{}}, Labels: collector.DefaultLabels()}.RequestsRunning(context.Background(), nil, at)
	assert.ErrorContains(t, err, "want an instant vector")
}
