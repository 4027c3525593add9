package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/test/testenv"
)

// TestControllerHPANoChurn: for each form a behavior annotation can take,
// the HPA the API server stores (with its defaults filled in) counts as in
// sync: after creation, resyncs and an HPA status write neither move its
// resourceVersion nor record HPAUpdated. Only the API server and `wva
// controller` run, so nothing else writes the HPAs.
func TestControllerHPANoChurn(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cluster, kube, wva := startCluster(ctx, t, "wva-system", "prod")
	startController(ctx, t, cluster, "--probe-namespace=wva-system", "--resync=1s", "--v=2")

	forms := []struct{ name, behavior string }{
		{"none", ""},
		{"scaleup-only", "scaleUp:\n  stabilizationWindowSeconds: 10"},
		{"scaledown-only", "scaleDown:\n  policies: [{type: Pods, value: 1, periodSeconds: 60}]"},
		{"partial-policies", "scaleUp:\n  policies: [{type: Pods, value: 2, periodSeconds: 15}]\nscaleDown:\n  policies: [{type: Percent, value: 50, periodSeconds: 30}]"},
		{"selectpolicy-omitted", "scaleUp:\n  stabilizationWindowSeconds: 0\n  policies: [{type: Pods, value: 2, periodSeconds: 15}]\n" +
			"scaleDown:\n  stabilizationWindowSeconds: 60\n  policies: [{type: Percent, value: 50, periodSeconds: 30}]"},
		{"empty-rules", "scaleUp: {}\nscaleDown: {}"},
		{"full", "scaleUp:\n  stabilizationWindowSeconds: 0\n  selectPolicy: Min\n  policies: [{type: Pods, value: 2, periodSeconds: 15}]\n" +
			"scaleDown:\n  stabilizationWindowSeconds: 60\n  selectPolicy: Max\n  policies: [{type: Percent, value: 50, periodSeconds: 30}]"},
	}
	for _, f := range forms {
		va := newVA("prod", f.name, "meta/llama", "5", 1, 8)
		if f.behavior != "" {
			va.Annotations = map[string]string{llmdv1alpha1.AnnotationHPABehavior: f.behavior}
		}
		_, err := wva.LlmdV1alpha1().VariantAutoscalings("prod").Create(ctx, va, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	hpas := kube.AutoscalingV2().HorizontalPodAutoscalers("prod")
	get := func(t *testing.T, name string) *autoscalingv2.HorizontalPodAutoscaler {
		h, err := hpas.Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		return h
	}
	created := map[string]*autoscalingv2.HorizontalPodAutoscaler{}
	for _, f := range forms {
		testenv.Eventually(ctx, t, "HPA "+f.name+" created", func() (bool, string) {
			h, err := hpas.Get(ctx, f.name, metav1.GetOptions{})
			created[f.name] = h
			return err == nil, fmt_(nil, err)
		})
	}

	time.Sleep(4 * time.Second) // several 1 s resyncs
	afterStatus := map[string]string{}
	for _, f := range forms {
		h := get(t, f.name)
		assert.Equal(t, created[f.name].ResourceVersion, h.ResourceVersion, "%s: resyncs moved the HPA", f.name)
		// A status write, as the HPA controller makes, sends an HPA event
		// and a reconcile of the VA.
		h.Status.CurrentReplicas, h.Status.DesiredReplicas = 1, 1
		h, err := hpas.UpdateStatus(ctx, h, metav1.UpdateOptions{})
		require.NoError(t, err)
		afterStatus[f.name] = h.ResourceVersion
	}
	time.Sleep(4 * time.Second)

	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			h := get(t, f.name)
			assert.Equal(t, afterStatus[f.name], h.ResourceVersion, "the controller wrote the HPA after its status changed")
			assert.Equal(t, created[f.name].Spec, h.Spec)
			assert.Equal(t, int32(1), h.Status.CurrentReplicas, "status write kept")
			count := func(reason string) int {
				evs, err := kube.CoreV1().Events("prod").List(ctx, metav1.ListOptions{
					FieldSelector: fmt.Sprintf("reason=%s,involvedObject.name=%s", reason, f.name)})
				require.NoError(t, err)
				n := 0
				for _, e := range evs.Items {
					n += int(max(e.Count, 1))
				}
				return n
			}
			// Events are recorded asynchronously: wait for the creation's.
			testenv.Eventually(ctx, t, "HPACreated recorded", func() (bool, string) {
				n := count("HPACreated")
				return n >= 1, fmt.Sprint(n)
			})
			assert.Equal(t, 1, count("HPACreated"))
			assert.Equal(t, 0, count("HPAUpdated"), "no-op updates after creation")
		})
	}
}
