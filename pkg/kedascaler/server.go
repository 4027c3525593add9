// Package kedascaler serves wva's decisions of record to KEDA as an
// external scaler (KEDA's externalscaler.proto over gRPC), for clusters
// where KEDA already holds the one external-metrics APIService. Like the
// external-metrics provider it only reads VariantAutoscaling status from an
// informer cache: no Prometheus client, no analyzer.
package kedascaler

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"regexp"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	llmdlisters "github.com/wva-project/wva/pkg/generated/listers/llmd/v1alpha1"
	pb "github.com/wva-project/wva/pkg/kedascaler/externalscaler"
	"github.com/wva-project/wva/pkg/provider"
)

// TargetSize is the per-replica target KEDA gives its HPA: with
// AverageValue 1 the HPA goes to exactly the served desired replicas.
const TargetSize = 1

// DefaultResendInterval bounds how long StreamIsActive stays silent, so a
// lost change notification costs at most this long.
const DefaultResendInterval = 30 * time.Second

// kedaMetricName matches the names KEDA may send back to GetMetrics: ours,
// or ours with KEDA's per-trigger "s<index>-" prefix.
var kedaMetricName = regexp.MustCompile(`^(s[0-9]+-)?` + regexp.QuoteMeta(llmdv1alpha1.MetricDesiredReplicas) + `$`)

// Scaler implements KEDA's ExternalScaler service.
type Scaler struct {
	pb.UnimplementedExternalScalerServer
	VAs            llmdlisters.VariantAutoscalingLister
	ResendInterval time.Duration
	// TLS, when set, secures the gRPC server (see ServerTLS); nil serves
	// plain gRPC.
	TLS *tls.Config

	requests *prometheus.CounterVec
	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on every Notify
	stopping chan struct{} // closed when serving ends: streams return
	stopOnce sync.Once
}

// New returns a server reading VAs; reg may be nil.
func New(vas llmdlisters.VariantAutoscalingLister, resend time.Duration, reg prometheus.Registerer) *Scaler {
	if resend <= 0 {
		resend = DefaultResendInterval
	}
	s := &Scaler{VAs: vas, ResendInterval: resend, changed: make(chan struct{}), stopping: make(chan struct{}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "wva_keda_scaler_requests_total",
			Help: "KEDA external scaler calls by method and gRPC code."}, []string{"method", "code"})}
	if reg != nil {
		reg.MustRegister(s.requests)
	}
	return s
}

// Notify wakes every StreamIsActive stream to re-check its variant; call it
// when a VA's status changes.
func (s *Scaler) Notify() {
	s.mu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

func (s *Scaler) changes() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// ServeListener serves on lis until ctx ends, then ends the open streams
// (KEDA reconnects to another replica) and stops gracefully.
func (s *Scaler) ServeListener(ctx context.Context, lis net.Listener) error {
	var opts []grpc.ServerOption
	if s.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(s.TLS)))
	}
	g := grpc.NewServer(opts...)
	pb.RegisterExternalScalerServer(g, s)
	go func() {
		<-ctx.Done()
		s.stopOnce.Do(func() { close(s.stopping) })
		g.GracefulStop()
	}()
	if err := g.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// desired returns the decision of record for the ScaledObject's variant,
// with gRPC codes KEDA acts on: NotFound for a misconfigured trigger,
// Unavailable while no decision exists (KEDA keeps the replicas).
func (s *Scaler) desired(ref *pb.ScaledObjectRef) (int32, error) {
	if ref == nil {
		return 0, status.Error(codes.InvalidArgument, "scaledObjectRef is required")
	}
	ns, name := ref.GetNamespace(), ref.GetName()
	if v := ref.GetScalerMetadata()[llmdv1alpha1.KEDAMetadataNamespace]; v != "" {
		if ns != "" && v != ns {
			return 0, status.Errorf(codes.InvalidArgument, "metadata %s=%q: a ScaledObject in namespace %q reads only VariantAutoscalings there",
				llmdv1alpha1.KEDAMetadataNamespace, v, ns)
		}
		ns = v
	}
	if v := ref.GetScalerMetadata()[llmdv1alpha1.KEDAMetadataVariant]; v != "" {
		name = v
	}
	if ns == "" || name == "" {
		return 0, status.Errorf(codes.InvalidArgument, "cannot name a VariantAutoscaling: namespace %q, name %q (set trigger metadata %s)",
			ns, name, llmdv1alpha1.KEDAMetadataVariant)
	}
	va, err := provider.DecisionOf(s.VAs, ns, name)
	switch {
	case apierrors.IsNotFound(err):
		return 0, status.Errorf(codes.NotFound, "VariantAutoscaling %s/%s not found (ScaledObject %s, trigger metadata %s=%q)",
			ns, name, ref.GetName(), llmdv1alpha1.KEDAMetadataVariant, ref.GetScalerMetadata()[llmdv1alpha1.KEDAMetadataVariant])
	case errors.Is(err, provider.ErrNoDecision):
		return 0, status.Error(codes.Unavailable, err.Error())
	case err != nil:
		return 0, status.Error(codes.Internal, err.Error())
	}
	return va.ServedReplicas(), nil
}

func (s *Scaler) count(method string, err error) {
	s.requests.WithLabelValues(method, status.Code(err).String()).Inc()
}

// IsActive: active while wva wants at least one replica; KEDA scales
// 0 <-> 1 on it and leaves 1 <-> N to its HPA.
func (s *Scaler) IsActive(_ context.Context, ref *pb.ScaledObjectRef) (*pb.IsActiveResponse, error) {
	n, err := s.desired(ref)
	s.count("IsActive", err)
	if err != nil {
		return nil, err
	}
	return &pb.IsActiveResponse{Result: n > 0}, nil
}

// StreamIsActive sends the activity at once, on every change, and at
// least every ResendInterval. While there is no decision it sends nothing
// (KEDA keeps what it has); an unknown variant ends the stream with NotFound.
func (s *Scaler) StreamIsActive(ref *pb.ScaledObjectRef, stream grpc.ServerStreamingServer[pb.IsActiveResponse]) error {
	ticker := time.NewTicker(s.ResendInterval)
	defer ticker.Stop()
	var last *bool
	for {
		changed := s.changes() // before reading, so no change slips between read and wait
		n, err := s.desired(ref)
		switch {
		case status.Code(err) == codes.Unavailable:
		case err != nil:
			s.count("StreamIsActive", err)
			return err
		default:
			if active := n > 0; last == nil || *last != active {
				if err := stream.Send(&pb.IsActiveResponse{Result: active}); err != nil {
					return err
				}
				last = &active
			}
		}
		select {
		case <-stream.Context().Done():
			s.count("StreamIsActive", nil)
			return nil
		case <-s.stopping:
			return status.Error(codes.Unavailable, "wva adapter shutting down")
		case <-changed:
		case <-ticker.C:
			last = nil // re-send even if unchanged
		}
	}
}

// GetMetricSpec: one metric, target 1 per replica.
func (s *Scaler) GetMetricSpec(_ context.Context, ref *pb.ScaledObjectRef) (*pb.GetMetricSpecResponse, error) {
	_, err := s.desired(ref)
	if status.Code(err) == codes.Unavailable {
		err = nil // the spec does not depend on the decision
	}
	s.count("GetMetricSpec", err)
	if err != nil {
		return nil, err
	}
	return metricSpec(), nil
}

func metricSpec() *pb.GetMetricSpecResponse {
	return &pb.GetMetricSpecResponse{MetricSpecs: []*pb.MetricSpec{{
		MetricName: llmdv1alpha1.MetricDesiredReplicas, TargetSize: TargetSize, TargetSizeFloat: TargetSize,
	}}}
}

// GetMetrics serves the desired replicas as the metric value.
func (s *Scaler) GetMetrics(_ context.Context, req *pb.GetMetricsRequest) (*pb.GetMetricsResponse, error) {
	if name := req.GetMetricName(); name != "" && !kedaMetricName.MatchString(name) {
		err := status.Errorf(codes.NotFound, "metricName %q: wva serves only %q", name, llmdv1alpha1.MetricDesiredReplicas)
		s.count("GetMetrics", err)
		return nil, err
	}
	n, err := s.desired(req.GetScaledObjectRef())
	s.count("GetMetrics", err)
	if err != nil {
		return nil, err
	}
	return &pb.GetMetricsResponse{MetricValues: []*pb.MetricValue{{
		MetricName: llmdv1alpha1.MetricDesiredReplicas, MetricValue: int64(n), MetricValueFloat: float64(n),
	}}}, nil
}

// StreamMetricSpec sends the (constant) spec once and holds the stream, as
// KEDA expects of servers that implement it.
func (s *Scaler) StreamMetricSpec(ref *pb.ScaledObjectRef, stream grpc.ServerStreamingServer[pb.GetMetricSpecResponse]) error {
	spec, err := s.GetMetricSpec(stream.Context(), ref)
	if err != nil {
		return err
	}
	if err := stream.Send(spec); err != nil {
		return err
	}
	select {
	case <-stream.Context().Done():
		return nil
	case <-s.stopping:
		return status.Error(codes.Unavailable, "wva adapter shutting down")
	}
}
