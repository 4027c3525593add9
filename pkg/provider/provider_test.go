package provider

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	llmdlisters "github.com/wva-project/wva/pkg/generated/listers/llmd/v1alpha1"
)

var now = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func newProvider(t *testing.T, vas ...*llmdv1alpha1.VariantAutoscaling) (*Provider, *prometheus.Registry) {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, va := range vas {
		require.NoError(t, idx.Add(va))
	}
	reg := prometheus.NewRegistry()
	return New(llmdlisters.NewVariantAutoscalingLister(idx), clocktesting.NewFakeClock(now), 5*time.Minute, reg), reg
}

func decided(ns, name string, replicas int32, at time.Time) *llmdv1alpha1.VariantAutoscaling {
	va := &llmdv1alpha1.VariantAutoscaling{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	va.Status.DesiredOptimizedAlloc = llmdv1alpha1.OptimizedAlloc{NumReplicas: replicas, LastRunTime: metav1.NewTime(at)}
	return va
}

// woken is a decision of record with the fast path's wake annotation.
func woken(name string, replicas int32, decidedAt, wokeAt time.Time) *llmdv1alpha1.VariantAutoscaling {
	va := decided("prod", name, replicas, decidedAt)
	va.Annotations = map[string]string{llmdv1alpha1.AnnotationScaledFromZeroAt: wokeAt.Format(time.RFC3339Nano)}
	return va
}

func sel(t *testing.T, s string) labels.Selector {
	t.Helper()
	out, err := labels.Parse(s)
	require.NoError(t, err)
	return out
}

func TestGetExternalMetric(t *testing.T) {
	p, reg := newProvider(t,
		decided("prod", "llama-l4", 3, now.Add(-30*time.Second)),
		decided("prod", "llama-h100", 0, now.Add(-time.Hour)),
		&llmdv1alpha1.VariantAutoscaling{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "fresh"}},
		decided("other", "llama-l4", 7, now),
		woken("woken", 0, now.Add(-time.Minute), now.Add(-10*time.Second)),
		woken("woken-same-second", 0, now.Add(-10*time.Second), now.Add(-10*time.Second+300*time.Millisecond)),
		woken("decided-after-wake", 0, now, now.Add(-time.Minute)),
		woken("woken-and-decided", 2, now.Add(-time.Minute), now.Add(-10*time.Second)),
	)
	info := cmprovider.ExternalMetricInfo{Metric: llmdv1alpha1.MetricDesiredReplicas}
	cases := []struct {
		name      string
		namespace string
		selector  string
		metric    string
		want      int64
		check     func(error) bool
		errText   string
	}{
		{name: "served", namespace: "prod", selector: "variant_name=llama-l4", want: 3},
		{name: "upstream label", namespace: "prod", selector: "variant_autoscaling=llama-l4", want: 3},
		{name: "namespaced", namespace: "other", selector: "variant_name=llama-l4", want: 7},
		{name: "stale decision still served", namespace: "prod", selector: "variant_name=llama-h100", want: 0},
		{name: "a 0 decided before the fast path's wake serves 1", namespace: "prod", selector: "variant_name=woken", want: 1},
		{name: "a 0 decided in the wake's second serves 1", namespace: "prod", selector: "variant_name=woken-same-second", want: 1},
		{name: "a 0 decided after the wake is served", namespace: "prod", selector: "variant_name=decided-after-wake", want: 0},
		{name: "a wake never lowers a decision", namespace: "prod", selector: "variant_name=woken-and-decided", want: 2},
		{name: "unknown variant", namespace: "prod", selector: "variant_name=nope", check: apierrors.IsNotFound, errText: "VariantAutoscaling prod/nope"},
		{name: "no decision yet", namespace: "prod", selector: "variant_name=fresh", check: apierrors.IsServiceUnavailable, errText: "no decision yet"},
		{name: "no selector", namespace: "prod", selector: "", check: apierrors.IsBadRequest, errText: "variant_name=<name>"},
		{name: "set selector is not a name", namespace: "prod", selector: "variant_name in (a,b)", check: apierrors.IsBadRequest},
		{name: "other metric", namespace: "prod", selector: "variant_name=llama-l4", metric: "something_else", check: apierrors.IsNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := info
			if tc.metric != "" {
				in.Metric = tc.metric
			}
			list, err := p.GetExternalMetric(context.Background(), tc.namespace, sel(t, tc.selector), in)
			if tc.check != nil {
				require.Error(t, err)
				assert.True(t, tc.check(err), "%v", err)
				assert.Contains(t, err.Error(), tc.errText)
				return
			}
			require.NoError(t, err)
			require.Len(t, list.Items, 1)
			item := list.Items[0]
			assert.Equal(t, llmdv1alpha1.MetricDesiredReplicas, item.MetricName)
			assert.Equal(t, tc.want, item.Value.Value())
			assert.False(t, item.Timestamp.IsZero())
		})
	}
	assert.Equal(t, 1.0, testutil.ToFloat64(p.served.WithLabelValues("stale")))
	assert.Equal(t, 7.0, testutil.ToFloat64(p.served.WithLabelValues("ok")))
	n, err := testutil.GatherAndCount(reg, "wva_decision_age_seconds")
	require.NoError(t, err)
	assert.Equal(t, 7, n, "one age series per decided VA")
	assert.Equal(t, []cmprovider.ExternalMetricInfo{{Metric: llmdv1alpha1.MetricDesiredReplicas}}, p.ListAllExternalMetrics())
}

func BenchmarkGetExternalMetric(b *testing.B) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for i := range 1000 {
		_ = idx.Add(decided("prod", "va-"+string(rune('a'+i%26))+time.Duration(i).String(), int32(i%10), now))
	}
	p := New(llmdlisters.NewVariantAutoscalingLister(idx), clocktesting.NewFakeClock(now), 5*time.Minute, prometheus.NewRegistry())
	s, _ := labels.Parse("variant_name=va-a0s")
	info := cmprovider.ExternalMetricInfo{Metric: llmdv1alpha1.MetricDesiredReplicas}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.GetExternalMetric(context.Background(), "prod", s, info); err != nil {
			b.Fatal(err)
		}
	}
}
