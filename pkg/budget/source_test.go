package budget

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestPodGPUs(t *testing.T) {
	q := func(n int64) corev1.ResourceList {
		return corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(n, resource.DecimalSI)}
	}
	p := &corev1.Pod{Spec: corev1.PodSpec{
		Containers:     []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: q(2)}}, {Resources: corev1.ResourceRequirements{Limits: q(1)}}},
		InitContainers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: q(2)}}},
	}}
	assert.Equal(t, int64(3), PodGPUs(p, "nvidia.com/gpu"))
	p.Spec.InitContainers[0].Resources.Requests = q(4)
	assert.Equal(t, int64(4), PodGPUs(p, "nvidia.com/gpu"), "a larger init container sets the reservation")
	trimmed, err := PodTransform(p)
	require.NoError(t, err)
	assert.Equal(t, int64(4), PodGPUs(trimmed.(*corev1.Pod), "nvidia.com/gpu"))
}
