package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/controller"
	pb "github.com/wva-project/wva/pkg/kedascaler/externalscaler"
	"github.com/wva-project/wva/test/testenv"
)

// scaledObjectCRD is the ScaledObject CRD fixture (see the file's header).
func scaledObjectCRD() string {
	return filepath.Join(repoRoot(), "test", "integration", "testdata", "crds", "keda.sh_scaledobjects.yaml")
}

// holdAdapterLease takes the adapter's Lease for the test, so the adapter
// never runs its engine and the test writes the decision of record.
func holdAdapterLease(ctx context.Context, t *testing.T, kube kubernetes.Interface) {
	t.Helper()
	_, err := kube.CoordinationV1().Leases("wva-system").Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "wva-adapter"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("the-test"), LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime: &metav1.MicroTime{Time: time.Now()}, RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// TestControllerScaledObjects runs the KEDA setup on a real kube-apiserver
// with KEDA's ScaledObject CRD: the adapter serves only the external scaler
// (no APIService registered), `wva controller --output=scaledobject` keeps
// one ScaledObject per VA, and the scaler answers KEDA's calls made with
// that ScaledObject's trigger metadata from the VA status.
func TestControllerScaledObjects(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cluster, kube, wva := startCluster(ctx, t, "wva-system", "prod")
	testenv.InstallCRDFiles(ctx, t, cluster.RESTConfig, scaledObjectCRD())
	dyn, err := dynamic.NewForConfig(cluster.RESTConfig)
	require.NoError(t, err)
	sos := dyn.Resource(controller.ScaledObjectGVR).Namespace("prod")
	r := &hpaRig{cluster: cluster, kube: kube, wva: wva}

	holdAdapterLease(ctx, t, kube)
	cert, key, err := cluster.IssueServingCert([]string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")})
	require.NoError(t, err)
	scalerAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	// The scaler serves TLS with a certificate of the cluster CA.
	scalerDir := t.TempDir()
	require.NoError(t, testenv.WriteSecretVolume(scalerDir, map[string][]byte{"tls.crt": cert, "tls.key": key}))
	startAdapter(ctx, t, cluster, fmt.Sprintf("http://127.0.0.1:%d", freePort(t)), cert, key,
		"--leader-elect=true", "--leader-election-namespace=wva-system", "--keda-scaler-address="+scalerAddr,
		"--keda-scaler-tls-cert-file="+filepath.Join(scalerDir, "tls.crt"), "--keda-scaler-tls-key-file="+filepath.Join(scalerDir, "tls.key"))
	startController(ctx, t, cluster, "--resync=2s", "--v=2", "--output=scaledobject", "--keda-scaler-address="+scalerAddr,
		"--keda-trigger-authentication=ClusterTriggerAuthentication/wva-keda-scaler")

	servingVariant(ctx, t, kube, "prod", "llama-l4", 2, nil)
	va, err := wva.LlmdV1alpha1().VariantAutoscalings("prod").Create(ctx, newVA("prod", "llama-l4", "meta/llama", "5", 1, 4), metav1.CreateOptions{})
	require.NoError(t, err)

	getSO := func(name string) (*unstructured.Unstructured, error) { return sos.Get(ctx, name, metav1.GetOptions{}) }
	minMax := func(so *unstructured.Unstructured) (int64, int64) {
		min, _, _ := unstructured.NestedInt64(so.Object, "spec", "minReplicaCount")
		max, _, _ := unstructured.NestedInt64(so.Object, "spec", "maxReplicaCount")
		return min, max
	}
	waitMinMax := func(what string, wantMin, wantMax int64) *unstructured.Unstructured {
		var so *unstructured.Unstructured
		testenv.Eventually(ctx, t, what, func() (bool, string) {
			if so, err = getSO("llama-l4"); err != nil {
				return false, err.Error()
			}
			min, max := minMax(so)
			return min == wantMin && max == wantMax, fmt.Sprintf("min %d max %d", min, max)
		})
		return so
	}
	triggerMetadata := func(so *unstructured.Unstructured) map[string]string {
		triggers, _, _ := unstructured.NestedSlice(so.Object, "spec", "triggers")
		require.Len(t, triggers, 1)
		md, _, _ := unstructured.NestedStringMap(triggers[0].(map[string]any), "metadata")
		return md
	}

	so := waitMinMax("ScaledObject created with min 1 max 4", 1, 4)
	t.Run("ScaledObject built from the VA", func(t *testing.T) {
		assert.Equal(t, map[string]string{"scalerAddress": scalerAddr, "namespace": "prod", "variantAutoscaling": "llama-l4"}, triggerMetadata(so))
		triggers, _, _ := unstructured.NestedSlice(so.Object, "spec", "triggers")
		assert.Equal(t, controller.KedaTriggerType, triggers[0].(map[string]any)["type"])
		auth, _, _ := unstructured.NestedStringMap(triggers[0].(map[string]any), "authenticationRef")
		assert.Equal(t, map[string]string{"kind": "ClusterTriggerAuthentication", "name": "wva-keda-scaler"}, auth, "KEDA gets the scaler's CA")
		ref, _, _ := unstructured.NestedStringMap(so.Object, "spec", "scaleTargetRef")
		assert.Equal(t, map[string]string{"apiVersion": "apps/v1", "kind": "Deployment", "name": "llama-l4"}, ref)
		require.Len(t, so.GetOwnerReferences(), 1)
		assert.Equal(t, va.UID, so.GetOwnerReferences()[0].UID)
		assert.Equal(t, llmdv1alpha1.ManagedByWVA, so.GetLabels()[llmdv1alpha1.LabelManagedBy])
		testenv.Eventually(ctx, t, "HPAReady=True ScaledObjectSynced",
			hpaReadyIs(ctx, wva, "prod", "llama-l4", metav1.ConditionTrue, llmdv1alpha1.ReasonScaledObjectSynced, ""))
	})

	t.Run("no update storm: a synced ScaledObject is left alone", func(t *testing.T) {
		before, err := getSO("llama-l4")
		require.NoError(t, err)
		time.Sleep(5 * time.Second) // more than two 2 s resyncs
		after, err := getSO("llama-l4")
		require.NoError(t, err)
		assert.Equal(t, before.GetResourceVersion(), after.GetResourceVersion())
	})

	t.Run("a hand-edited ScaledObject is repaired, user fields kept", func(t *testing.T) {
		_, err := sos.Patch(ctx, "llama-l4", types.MergePatchType, []byte(
			`{"spec":{"maxReplicaCount":99,"pollingInterval":5,"triggers":[{"type":"external","metadata":{"scalerAddress":"elsewhere:1"}}]}}`),
			metav1.PatchOptions{})
		require.NoError(t, err)
		so := waitMinMax("max restored to 4", 1, 4)
		assert.Equal(t, "llama-l4", triggerMetadata(so)["variantAutoscaling"], "trigger restored")
		poll, _, _ := unstructured.NestedInt64(so.Object, "spec", "pollingInterval")
		assert.Equal(t, int64(5), poll, "pollingInterval is the user's")

		require.NoError(t, sos.Delete(ctx, "llama-l4", metav1.DeleteOptions{}))
		testenv.Eventually(ctx, t, "deleted ScaledObject recreated", func() (bool, string) {
			so, err := getSO("llama-l4")
			return err == nil && so.GetDeletionTimestamp() == nil, fmt_(nil, err)
		})
	})

	t.Run("VA min/max edits reach the ScaledObject", func(t *testing.T) {
		r.updateVA(ctx, t, "llama-l4", func(va *llmdv1alpha1.VariantAutoscaling) {
			va.Spec.MinReplicas = ptr.To[int32](0)
			va.Spec.MaxReplicas = 6
		})
		waitMinMax("min 0 max 6", 0, 6)
	})

	t.Run("the scaler answers KEDA's calls from the VA status", func(t *testing.T) {
		so, err := getSO("llama-l4")
		require.NoError(t, err)
		// What KEDA sends: the ScaledObject's name and namespace and its
		// trigger's metadata.
		ref := &pb.ScaledObjectRef{Name: so.GetName(), Namespace: so.GetNamespace(), ScalerMetadata: triggerMetadata(so)}
		// KEDA's side of the trigger's caCert.
		roots := x509.NewCertPool()
		require.True(t, roots.AppendCertsFromPEM(cluster.CAPEM))
		conn, err := grpc.NewClient(scalerAddr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})))
		require.NoError(t, err)
		defer conn.Close()
		client := pb.NewExternalScalerClient(conn)

		r.decide(ctx, t, "llama-l4", 3)
		testenv.Eventually(ctx, t, "GetMetrics serves 3", func() (bool, string) {
			got, err := client.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: ref, MetricName: "s0-wva_desired_replicas"})
			if err != nil {
				return false, err.Error()
			}
			return got.MetricValues[0].MetricValue == 3, got.String()
		})
		spec, err := client.GetMetricSpec(ctx, ref)
		require.NoError(t, err)
		assert.InDelta(t, 1.0, spec.MetricSpecs[0].TargetSizeFloat, 0)

		streamCtx, stop := context.WithCancel(ctx)
		defer stop()
		stream, err := client.StreamIsActive(streamCtx, ref)
		require.NoError(t, err)
		first, err := stream.Recv()
		require.NoError(t, err)
		assert.True(t, first.Result, "desired 3 is active")
		start := time.Now()
		r.decide(ctx, t, "llama-l4", 0)
		next, err := stream.Recv()
		require.NoError(t, err)
		assert.False(t, next.Result, "desired 0 pushed as inactive")
		t.Logf("decision 0 reached the StreamIsActive stream in %s", time.Since(start).Round(time.Millisecond))
		assert.Less(t, time.Since(start), 10*time.Second, "pushed on change, not on the 30 s resend")
	})

	t.Run("decision 0 is left to KEDA: no direct scaling", func(t *testing.T) {
		// The VA allows 0 and the decision of record is 0; in HPA mode on
		// a cluster without HPAScaleToZero the controller would scale the
		// Deployment to 0 itself. Here KEDA owns 0 <-> 1.
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			d, err := kube.AppsV1().Deployments("prod").Get(ctx, "llama-l4", metav1.GetOptions{})
			require.NoError(t, err)
			require.Equal(t, int32(2), *d.Spec.Replicas)
			time.Sleep(500 * time.Millisecond)
		}
	})

	t.Run("an HPA left from --output=hpa is removed", func(t *testing.T) {
		hpa := &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Name: "llama-l4", Namespace: "prod", Labels: map[string]string{llmdv1alpha1.LabelVariantAutoscaling: "llama-l4"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "llmd.ai/v1alpha1", Kind: "VariantAutoscaling", Name: "llama-l4",
					UID: va.UID, Controller: ptr.To(true)}}},
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "llama-l4"},
				MinReplicas:    ptr.To[int32](1), MaxReplicas: 4,
			},
		}
		_, err := kube.AutoscalingV2().HorizontalPodAutoscalers("prod").Create(ctx, hpa, metav1.CreateOptions{})
		require.NoError(t, err)
		testenv.Eventually(ctx, t, "wva's old HPA deleted", func() (bool, string) {
			_, err := kube.AutoscalingV2().HorizontalPodAutoscalers("prod").Get(ctx, "llama-l4", metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt_(nil, err)
		})
		// Events are recorded asynchronously: the one for the delete may land
		// after the HPA is gone.
		testenv.Eventually(ctx, t, "deleted by the controller, which says so (HPADeleted)", func() (bool, string) {
			evs, err := kube.CoreV1().Events("prod").List(ctx, metav1.ListOptions{FieldSelector: "reason=HPADeleted"})
			if err != nil || len(evs.Items) == 0 {
				return false, fmt_(nil, err)
			}
			return strings.Contains(evs.Items[0].Message, "KEDA's HPA for ScaledObject llama-l4 replaces it"), evs.Items[0].Message
		})
	})

	t.Run("a foreign ScaledObject made after wva's is a conflict; the older one stays", func(t *testing.T) {
		own, err := getSO("llama-l4")
		require.NoError(t, err)
		late := &unstructured.Unstructured{Object: map[string]any{
			"spec": map[string]any{
				"scaleTargetRef": map[string]any{"name": "llama-l4"},
				"triggers":       []any{map[string]any{"type": "cpu", "metadata": map[string]any{"value": "50"}}},
			},
		}}
		late.SetGroupVersionKind(controller.ScaledObjectGVK)
		late.SetName("late-comer")
		_, err = sos.Create(ctx, late, metav1.CreateOptions{})
		require.NoError(t, err)
		testenv.Eventually(ctx, t, "HPAReady=False ScaledObjectConflict naming the late-comer",
			hpaReadyIs(ctx, wva, "prod", "llama-l4", metav1.ConditionFalse, llmdv1alpha1.ReasonScaledObjectConflict, "ScaledObject late-comer also scales Deployment llama-l4"))
		still, err := getSO("llama-l4")
		require.NoError(t, err, "wva's ScaledObject, the older, stays")
		assert.Equal(t, own.GetUID(), still.GetUID())

		require.NoError(t, sos.Delete(ctx, "late-comer", metav1.DeleteOptions{}))
		testenv.Eventually(ctx, t, "HPAReady=True ScaledObjectSynced once the late-comer is gone",
			hpaReadyIs(ctx, wva, "prod", "llama-l4", metav1.ConditionTrue, llmdv1alpha1.ReasonScaledObjectSynced, ""))
	})

	t.Run("a foreign ScaledObject on the target is a conflict, not a second one", func(t *testing.T) {
		servingVariant(ctx, t, kube, "prod", "llama-h100", 1, nil)
		foreign := &unstructured.Unstructured{Object: map[string]any{
			"spec": map[string]any{
				"scaleTargetRef": map[string]any{"name": "llama-h100"},
				"triggers":       []any{map[string]any{"type": "cpu", "metadata": map[string]any{"value": "50"}}},
			},
		}}
		foreign.SetGroupVersionKind(controller.ScaledObjectGVK)
		foreign.SetName("someone-else")
		_, err := sos.Create(ctx, foreign, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = wva.LlmdV1alpha1().VariantAutoscalings("prod").Create(ctx, newVA("prod", "llama-h100", "meta/llama", "20", 1, 4), metav1.CreateOptions{})
		require.NoError(t, err)
		testenv.Eventually(ctx, t, "HPAReady=False ScaledObjectConflict",
			hpaReadyIs(ctx, wva, "prod", "llama-h100", metav1.ConditionFalse, llmdv1alpha1.ReasonScaledObjectConflict, "ScaledObject someone-else already scales Deployment llama-h100"))
		_, err = getSO("llama-h100")
		assert.True(t, apierrors.IsNotFound(err), "no second ScaledObject: %v", err)
	})
}

// TestControllerScaledObjectsWithoutKEDA: asked for ScaledObjects on a
// cluster without KEDA, the controller exits at once and says why.
func TestControllerScaledObjectsWithoutKEDA(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cluster, _, _ := startCluster(ctx, t, "wva-system")
	out, err := exec.CommandContext(ctx, wvaBinary, "controller", "--kubeconfig="+cluster.KubeconfigPath, "--leader-elect=false",
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--output=scaledobject", "--keda-scaler-address=127.0.0.1:9090").CombinedOutput()
	require.Error(t, err, "must not run without the ScaledObject API")
	assert.Contains(t, string(out), "--output=scaledobject: the API server does not serve scaledobjects.keda.sh/v1alpha1; install KEDA")
}
