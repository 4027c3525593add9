package controller

import (
	"context"
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
)

// ProbeCapabilities asks the API server, with server-side dry runs, whether
// it accepts an HPA with minReplicas 0 (HPAScaleToZero) and keeps a
// behavior tolerance (HPAConfigurableTolerance): disabled gates make the API
// server reject the first and silently drop the second.
func ProbeCapabilities(ctx context.Context, kube kubernetes.Interface, namespace string) (Capabilities, error) {
	probe := func(min int32) (*autoscalingv2.HorizontalPodAutoscaler, error) {
		tol := resource.MustParse("0")
		hpa := &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "wva-capability-probe-"},
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "wva-capability-probe"},
				MinReplicas:    ptr.To(min), MaxReplicas: 2,
				Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
					Metric: autoscalingv2.MetricIdentifier{Name: llmdv1alpha1.MetricDesiredReplicas},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("1"))},
				}}},
				Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{Tolerance: &tol}},
			},
		}
		return kube.AutoscalingV2().HorizontalPodAutoscalers(namespace).Create(ctx, hpa,
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	}
	var caps Capabilities
	got, err := probe(0)
	switch {
	case err == nil:
		caps.ScaleToZero = true
	case apierrors.IsInvalid(err):
		if got, err = probe(1); err != nil {
			return caps, fmt.Errorf("probing HPA capabilities in namespace %s: %w", namespace, err)
		}
	default:
		return caps, fmt.Errorf("probing HPA capabilities in namespace %s: %w", namespace, err)
	}
	caps.Tolerance = got.Spec.Behavior != nil && got.Spec.Behavior.ScaleUp != nil && got.Spec.Behavior.ScaleUp.Tolerance != nil
	return caps, nil
}
