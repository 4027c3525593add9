package daemon

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
)

func TestClients(t *testing.T) {
	kube, wva, err := Clients(&rest.Config{Host: "https://127.0.0.1:6443"})
	require.NoError(t, err)
	assert.NotNil(t, kube)
	assert.NotNil(t, wva)
	_, _, err = Clients(&rest.Config{Host: "https://127.0.0.1:6443", QPS: 1, Burst: 0})
	assert.Error(t, err, "a rate limit without burst is refused")
}

// An Event on a VariantAutoscaling reaches the API server with the
// component as its source.
func TestEventRecorderRecordsVAEvents(t *testing.T) {
	kube := fake.NewSimpleClientset()
	recorder, broadcaster := EventRecorder(kube, "wva-test")
	defer broadcaster.Shutdown()
	va := &llmdv1alpha1.VariantAutoscaling{ObjectMeta: metav1.ObjectMeta{Name: "va", Namespace: "ns", UID: "u"}}
	recorder.Event(va, corev1.EventTypeWarning, "Blocked", "no budget")

	var events *corev1.EventList
	require.Eventually(t, func() bool {
		var err error
		events, err = kube.CoreV1().Events("ns").List(t.Context(), metav1.ListOptions{})
		return err == nil && len(events.Items) == 1
	}, 5*time.Second, 10*time.Millisecond)
	ev := events.Items[0]
	assert.Equal(t, "wva-test", ev.Source.Component)
	assert.Equal(t, "VariantAutoscaling", ev.InvolvedObject.Kind)
	assert.Equal(t, "va", ev.InvolvedObject.Name)
	assert.Equal(t, "Blocked", ev.Reason)
}
