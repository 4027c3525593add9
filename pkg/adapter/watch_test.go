package adapter

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
)

func TestVAChanged(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 4, 0, 0, 0, time.UTC)
	base := func() *llmdv1alpha1.VariantAutoscaling {
		va := &llmdv1alpha1.VariantAutoscaling{ObjectMeta: metav1.ObjectMeta{Name: "l4", Namespace: "prod", Generation: 1}}
		va.Status.DesiredOptimizedAlloc = llmdv1alpha1.OptimizedAlloc{NumReplicas: 0, LastRunTime: metav1.NewTime(t0)}
		return va
	}
	cases := []struct {
		name                string
		edit                func(*llmdv1alpha1.VariantAutoscaling)
		wantDecide, wantSrv bool
	}{
		{"nothing", func(*llmdv1alpha1.VariantAutoscaling) {}, false, false},
		{"spec change", func(va *llmdv1alpha1.VariantAutoscaling) { va.Generation++ }, true, false},
		{"our own status write", func(va *llmdv1alpha1.VariantAutoscaling) {
			va.Status.DesiredOptimizedAlloc.NumReplicas = 2
		}, false, true},
		{"a wake after the decision of 0", func(va *llmdv1alpha1.VariantAutoscaling) {
			va.Annotations = map[string]string{llmdv1alpha1.AnnotationScaledFromZeroAt: t0.Add(time.Second).Format(time.RFC3339Nano)}
		}, true, true},
		{"a wake marker older than the decision", func(va *llmdv1alpha1.VariantAutoscaling) {
			va.Annotations = map[string]string{llmdv1alpha1.AnnotationScaledFromZeroAt: t0.Add(-time.Minute).Format(time.RFC3339Nano)}
		}, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, n := base(), base()
			tc.edit(n)
			decide, serve := vaChanged(o, n)
			assert.Equal(t, tc.wantDecide, decide, "decide")
			assert.Equal(t, tc.wantSrv, serve, "serve")
		})
	}
}
