package kedascaler

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	llmdlisters "github.com/wva-project/wva/pkg/generated/listers/llmd/v1alpha1"
	pb "github.com/wva-project/wva/pkg/kedascaler/externalscaler"
)

func va(ns, name string, replicas int32, decided bool) *llmdv1alpha1.VariantAutoscaling {
	v := &llmdv1alpha1.VariantAutoscaling{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if decided {
		v.Status.DesiredOptimizedAlloc = llmdv1alpha1.OptimizedAlloc{NumReplicas: replicas, LastRunTime: metav1.Now()}
	}
	return v
}

// rig is the real gRPC server on a loopback port, a real client connected
// to it, and the store behind the server.
type rig struct {
	client pb.ExternalScalerClient
	store  cache.Indexer
	srv    *Scaler
	// stop ends serving and returns ServeListener's result, or fails the
	// test if it does not return within 5 s.
	stop func() error
}

func serve(t *testing.T, resend time.Duration, vas ...*llmdv1alpha1.VariantAutoscaling) rig {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, v := range vas {
		require.NoError(t, idx.Add(v))
	}
	srv := New(llmdlisters.NewVariantAutoscalingLister(idx), resend, prometheus.NewRegistry())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ServeListener(ctx, lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	var once sync.Once
	var result error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case result = <-done:
			case <-time.After(5 * time.Second):
				result = errors.New("server did not stop within 5 s")
			}
		})
		return result
	}
	t.Cleanup(func() {
		_ = conn.Close()
		require.NoError(t, stop())
	})
	return rig{client: pb.NewExternalScalerClient(conn), store: idx, srv: srv, stop: stop}
}

func start(t *testing.T, resend time.Duration, vas ...*llmdv1alpha1.VariantAutoscaling) (pb.ExternalScalerClient, cache.Indexer, *Scaler) {
	t.Helper()
	r := serve(t, resend, vas...)
	return r.client, r.store, r.srv
}

func ref(name string, md map[string]string) *pb.ScaledObjectRef {
	return &pb.ScaledObjectRef{Name: name, Namespace: "prod", ScalerMetadata: md}
}

func TestUnaryRPCs(t *testing.T) {
	client, _, srv := start(t, time.Minute,
		va("prod", "llama-l4", 3, true), va("prod", "llama-h100", 0, true), va("prod", "fresh", 0, false), va("other", "llama-l4", 9, true))
	ctx := context.Background()
	cases := []struct {
		name       string
		ref        *pb.ScaledObjectRef
		metricName string
		wantValue  int64
		wantActive bool
		wantCode   codes.Code // of IsActive and GetMetrics
		specCode   codes.Code
	}{
		{name: "metadata names the VA", ref: ref("so-x", map[string]string{llmdv1alpha1.KEDAMetadataVariant: "llama-l4"}), wantValue: 3, wantActive: true},
		{name: "ScaledObject named after the VA", ref: ref("llama-l4", nil), wantValue: 3, wantActive: true},
		{name: "KEDA's indexed metric name", ref: ref("llama-l4", nil), metricName: "s0-wva_desired_replicas", wantValue: 3, wantActive: true},
		{name: "desired 0 is inactive", ref: ref("llama-h100", nil), wantValue: 0, wantActive: false},
		{name: "matching namespace metadata", ref: ref("llama-l4", map[string]string{llmdv1alpha1.KEDAMetadataNamespace: "prod"}), wantValue: 3, wantActive: true},
		{name: "no decision yet", ref: ref("fresh", nil), wantCode: codes.Unavailable},
		{name: "unknown variant", ref: ref("nope", nil), wantCode: codes.NotFound, specCode: codes.NotFound},
		{name: "other namespace refused", ref: ref("llama-l4", map[string]string{llmdv1alpha1.KEDAMetadataNamespace: "other"}),
			wantCode: codes.InvalidArgument, specCode: codes.InvalidArgument},
		{name: "no name at all", ref: &pb.ScaledObjectRef{Namespace: "prod"}, wantCode: codes.InvalidArgument, specCode: codes.InvalidArgument},
		{name: "other metric", ref: ref("llama-l4", nil), metricName: "cpu", wantCode: codes.NotFound, wantActive: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			metricName := tc.metricName
			if metricName == "" {
				metricName = "wva_desired_replicas"
			}
			metrics, err := client.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: tc.ref, MetricName: metricName})
			require.Equal(t, tc.wantCode, status.Code(err), "GetMetrics: %v", err)
			if tc.wantCode == codes.OK {
				require.Len(t, metrics.MetricValues, 1)
				assert.Equal(t, "wva_desired_replicas", metrics.MetricValues[0].MetricName)
				assert.Equal(t, tc.wantValue, metrics.MetricValues[0].MetricValue)
				assert.InDelta(t, float64(tc.wantValue), metrics.MetricValues[0].MetricValueFloat, 0)
			}

			if tc.metricName != "cpu" {
				active, err := client.IsActive(ctx, tc.ref)
				require.Equal(t, tc.wantCode, status.Code(err), "IsActive: %v", err)
				if err == nil {
					assert.Equal(t, tc.wantActive, active.Result)
				}
			}

			spec, err := client.GetMetricSpec(ctx, tc.ref)
			require.Equal(t, tc.specCode, status.Code(err), "GetMetricSpec: %v", err)
			if err == nil {
				require.Len(t, spec.MetricSpecs, 1)
				assert.Equal(t, "wva_desired_replicas", spec.MetricSpecs[0].MetricName)
				assert.Equal(t, int64(1), spec.MetricSpecs[0].TargetSize)
				assert.InDelta(t, 1.0, spec.MetricSpecs[0].TargetSizeFloat, 0)
			}
		})
	}
	_, err := client.IsActive(ctx, ref("nope", nil))
	assert.Contains(t, status.Convert(err).Message(), "VariantAutoscaling prod/nope not found")
	// One IsActive NotFound per table row "unknown variant" plus the call above.
	assert.Equal(t, 2.0, testutil.ToFloat64(srv.requests.WithLabelValues("IsActive", "NotFound")))
}

// recv reads the next StreamIsActive message or fails after timeout.
func recv(t *testing.T, stream grpc.ServerStreamingClient[pb.IsActiveResponse], timeout time.Duration) bool {
	t.Helper()
	got := make(chan *pb.IsActiveResponse, 1)
	errs := make(chan error, 1)
	go func() {
		m, err := stream.Recv()
		if err != nil {
			errs <- err
			return
		}
		got <- m
	}()
	select {
	case m := <-got:
		return m.Result
	case err := <-errs:
		t.Fatalf("stream ended: %v", err)
	case <-time.After(timeout):
		t.Fatalf("no message within %s", timeout)
	}
	return false
}

func TestStreamIsActivePushesChanges(t *testing.T) {
	client, idx, srv := start(t, time.Hour, va("prod", "llama-l4", 2, true))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := client.StreamIsActive(ctx, ref("llama-l4", nil))
	require.NoError(t, err)
	assert.True(t, recv(t, stream, 5*time.Second), "first message: current state")

	// A decision of 0 reaches the stream on Notify, long before the
	// one-hour resend interval.
	require.NoError(t, idx.Update(va("prod", "llama-l4", 0, true)))
	srv.Notify()
	assert.False(t, recv(t, stream, 5*time.Second), "pushed on change to 0")

	require.NoError(t, idx.Update(va("prod", "llama-l4", 4, true)))
	srv.Notify()
	assert.True(t, recv(t, stream, 5*time.Second), "pushed on change back to 4")
}

func TestStreamIsActiveResendsWithinInterval(t *testing.T) {
	client, _, _ := start(t, 100*time.Millisecond, va("prod", "llama-l4", 1, true))
	stream, err := client.StreamIsActive(context.Background(), ref("llama-l4", nil))
	require.NoError(t, err)
	start := time.Now()
	for range 3 {
		assert.True(t, recv(t, stream, 2*time.Second))
	}
	// Three messages with no change: the initial one and two resends.
	assert.Less(t, time.Since(start), 2*time.Second)
}

func TestStreamIsActiveWaitsForFirstDecision(t *testing.T) {
	client, idx, srv := start(t, time.Hour, va("prod", "fresh", 0, false))
	stream, err := client.StreamIsActive(context.Background(), ref("fresh", nil))
	require.NoError(t, err)
	require.NoError(t, idx.Update(va("prod", "fresh", 1, true)))
	srv.Notify()
	assert.True(t, recv(t, stream, 5*time.Second), "first message only once a decision exists")
}

func TestStreamIsActiveUnknownVariant(t *testing.T) {
	client, _, _ := start(t, time.Hour)
	stream, err := client.StreamIsActive(context.Background(), ref("nope", nil))
	require.NoError(t, err)
	_, err = stream.Recv()
	assert.Equal(t, codes.NotFound, status.Code(err), "%v", err)
}

func TestStreamMetricSpec(t *testing.T) {
	client, _, _ := start(t, time.Hour, va("prod", "llama-l4", 1, true))
	stream, err := client.StreamMetricSpec(context.Background(), ref("llama-l4", nil))
	require.NoError(t, err)
	spec, err := stream.Recv()
	require.NoError(t, err)
	require.Len(t, spec.MetricSpecs, 1)
	assert.Equal(t, "wva_desired_replicas", spec.MetricSpecs[0].MetricName)
	assert.InDelta(t, 1.0, spec.MetricSpecs[0].TargetSizeFloat, 0)
}

// TestShutdownEndsOpenStreams: KEDA holds its streams open for good; the
// adapter must still stop (and KEDA reconnect elsewhere).
func TestShutdownEndsOpenStreams(t *testing.T) {
	r := serve(t, time.Hour, va("prod", "llama-l4", 1, true))
	client := r.client
	active, err := client.StreamIsActive(context.Background(), ref("llama-l4", nil))
	require.NoError(t, err)
	assert.True(t, recv(t, active, 5*time.Second))
	specs, err := client.StreamMetricSpec(context.Background(), ref("llama-l4", nil))
	require.NoError(t, err)
	_, err = specs.Recv()
	require.NoError(t, err)

	require.NoError(t, r.stop(), "server stops with two streams open")
	_, err = active.Recv()
	assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	_, err = specs.Recv()
	assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
}
