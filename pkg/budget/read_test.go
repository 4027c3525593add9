package budget

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
)

func TestLimiterVariants(t *testing.T) {
	r := Reading{Pools: []Pool{{Name: "H100", NodeSelector: labels.Set{"acc": "H100"}}, {Name: "big", NodeSelector: labels.Set{"pool": "big"}}}}
	mem := resource.MustParse("1Gi")
	for _, tc := range []struct {
		name     string
		acc      string
		ann      map[string]string
		nodeSel  map[string]string
		wantPool string
	}{
		{name: "annotation names the pool", acc: "H100", ann: map[string]string{llmdv1alpha1.AnnotationNodePool: "big"}, wantPool: "big"},
		{name: "annotation wins even for a missing pool", acc: "H100", ann: map[string]string{llmdv1alpha1.AnnotationNodePool: "typo"}, wantPool: "typo"},
		{name: "node selector implies the pool", acc: "H100", nodeSel: map[string]string{"pool": "big"}, wantPool: "big"},
		{name: "pool named after the accelerator", acc: "H100", wantPool: "H100"},
		{name: "no pool: not limited", acc: "L4", wantPool: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			va := &llmdv1alpha1.VariantAutoscaling{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "v", Annotations: tc.ann}}
			va.Spec.AcceleratorName, va.Spec.GPUsPerReplica, va.Spec.GPUMemoryPerReplica = tc.acc, ptr.To(int32(2)), &mem
			got := r.LimiterVariants([]Workload{{VA: va, Replicas: 3, TemplateNodeSelector: tc.nodeSel}})
			assert.Equal(t, []Variant{{Key: "prod/v", Namespace: "prod", Pool: tc.wantPool, Replicas: 3,
				PerReplica: Amount{GPUs: 2, GPUMemory: 1 << 30}}}, got)
		})
	}
}
