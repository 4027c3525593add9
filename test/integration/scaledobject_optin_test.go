package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	pb "github.com/wva-project/wva/pkg/kedascaler/externalscaler"
	"github.com/wva-project/wva/test/testenv"
)

// TestScaledObjectOptInByAnnotations: a user-owned KEDA ScaledObject
// carrying upstream WVA v0.9's opt-in annotations (no VariantAutoscaling)
// is a variant, with KEDA's default minReplicaCount (0) and kind
// (Deployment). The adapter serves its decision both ways a ScaledObject
// reads it: wva's external scaler, called with the ScaledObject's name as
// KEDA calls it, and wva_desired_replicas{variant_name=<ScaledObject name>}
// on the external metrics API. A VA for the same target wins (one Warning
// Event on the ScaledObject), and removing llm-d.ai/managed stops both.
// wva never writes the ScaledObject. There is no KEDA operator here: the
// test calls the scaler as KEDA would.
func TestScaledObjectOptInByAnnotations(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cluster, cs, wva := startCluster(ctx, t, "wva-system", "prod")
	// Before the adapter starts: it reads ScaledObjects when their API is
	// served at start-up.
	testenv.InstallCRDFiles(ctx, t, cluster.RESTConfig, scaledObjectCRD())
	dyn, err := dynamic.NewForConfig(cluster.RESTConfig)
	require.NoError(t, err)
	sos := dyn.Resource(llmdv1alpha1.ScaledObjectResource).Namespace("prod")

	// Two Ready pods at KV 0.5 under threshold 0.55 / trigger 0.10: spare
	// 0.05 < 0.10, so the engine decides a scale-up from 2 to 3.
	const model = "meta/llama-3.1-8b"
	prom := optInFleet(ctx, t, cs, model)

	scalerAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startAdapterAPIService(ctx, t, cluster, prom.URL, "--keda-scaler-address="+scalerAddr, "--keda-scaler-insecure")

	// The ScaledObject as upstream documents it, with the external-push
	// trigger that reaches wva's scaler; its name is not the Deployment's,
	// so the answers prove variant_name is the ScaledObject's name.
	const name = "llama-upstream-so"
	so := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
		"metadata": map[string]any{"namespace": "prod", "name": name, "annotations": map[string]any{
			llmdv1alpha1.AnnotationManaged: "true", llmdv1alpha1.AnnotationModelID: model, llmdv1alpha1.AnnotationVariantCost: "5"}},
		"spec": map[string]any{
			"scaleTargetRef":  map[string]any{"name": "llama-l4"},
			"maxReplicaCount": int64(5),
			"triggers":        []any{map[string]any{"type": "external-push", "metadata": map[string]any{"scalerAddress": scalerAddr}}},
		},
	}}
	created, err := sos.Create(ctx, so, metav1.CreateOptions{})
	require.NoError(t, err)

	conn, err := grpc.NewClient(scalerAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	scaler := pb.NewExternalScalerClient(conn)
	// What KEDA sends: the ScaledObject's name and namespace and its
	// trigger's metadata.
	ref := &pb.ScaledObjectRef{Name: name, Namespace: "prod", ScalerMetadata: map[string]string{"scalerAddress": scalerAddr}}
	fromScaler := func() (int64, error) {
		got, err := scaler.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: ref, MetricName: "s0-" + llmdv1alpha1.MetricDesiredReplicas})
		if err != nil {
			return 0, err
		}
		return got.MetricValues[0].MetricValue, nil
	}
	fromMetricsAPI := func() (int64, error) {
		list, err := getRaw(ctx, cs, "prod", name)
		if err != nil {
			return 0, err
		}
		if len(list.Items) != 1 {
			return 0, apierrors.NewInternalError(assert.AnError)
		}
		return list.Items[0].Value.Value(), nil
	}
	servedBoth := func(what string, want int64) {
		t.Helper()
		testenv.Eventually(ctx, t, what, func() (bool, string) {
			s, serr := fromScaler()
			m, merr := fromMetricsAPI()
			return serr == nil && merr == nil && s == want && m == want, fmt.Sprintf("scaler %d (%v), metrics API %d (%v)", s, serr, m, merr)
		})
	}
	servedNeither := func(what string) {
		t.Helper()
		testenv.Eventually(ctx, t, what, func() (bool, string) {
			_, serr := fromScaler()
			_, merr := fromMetricsAPI()
			return status.Code(serr) == codes.NotFound && apierrors.IsNotFound(merr), fmt.Sprintf("scaler %v, metrics API %v", serr, merr)
		})
	}
	events := func(reason string) []corev1.Event {
		evs, err := cs.CoreV1().Events("prod").List(ctx, metav1.ListOptions{FieldSelector: fields.AndSelectors(
			fields.OneTermEqualSelector("involvedObject.name", name), fields.OneTermEqualSelector("reason", reason)).String()})
		require.NoError(t, err)
		return evs.Items
	}

	t.Run("the scaler and the metrics API serve the decision by the ScaledObject's name", func(t *testing.T) {
		servedBoth("3 for variant_name=llama-upstream-so", 3)
		active, err := scaler.IsActive(ctx, ref)
		require.NoError(t, err)
		assert.True(t, active.Result)
		// The engine's Events about the variant name the ScaledObject.
		testenv.Eventually(ctx, t, "DesiredReplicasChanged Event on the ScaledObject", func() (bool, string) {
			evs := events("DesiredReplicasChanged")
			return len(evs) > 0 && evs[0].InvolvedObject.Kind == "ScaledObject", fmt_(evs, nil)
		})
		vas, err := wva.LlmdV1alpha1().VariantAutoscalings("prod").List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		assert.Empty(t, vas.Items, "no VA object is created for it")
	})

	t.Run("a VA for the same Deployment wins, with one Warning Event", func(t *testing.T) {
		_, err := wva.LlmdV1alpha1().VariantAutoscalings("prod").Create(ctx, newVA("prod", "llama-l4", model, "5", 1, 5), metav1.CreateOptions{})
		require.NoError(t, err)
		testenv.Eventually(ctx, t, "ConflictingVariantAutoscaling Event on the ScaledObject", func() (bool, string) {
			evs := events(llmdv1alpha1.ReasonConflictingVariantAutoscaling)
			return len(evs) == 1, fmt_(evs, nil)
		})
		servedNeither("the ScaledObject's variant is no longer served")
		// Many engine cycles later (1 s interval), still one Event of count 1.
		time.Sleep(4 * time.Second)
		evs := events(llmdv1alpha1.ReasonConflictingVariantAutoscaling)
		require.Len(t, evs, 1)
		assert.Equal(t, int32(1), evs[0].Count, "reported once per conflict, not per cycle")
		assert.Equal(t, corev1.EventTypeWarning, evs[0].Type)
		assert.Equal(t, "ScaledObject", evs[0].InvolvedObject.Kind)
		assert.Contains(t, evs[0].Message, "VariantAutoscaling llama-l4 also scales Deployment llama-l4")

		require.NoError(t, wva.LlmdV1alpha1().VariantAutoscalings("prod").Delete(ctx, "llama-l4", metav1.DeleteOptions{}))
		servedBoth("served again once the VA is gone", 3)
	})

	t.Run("removing llm-d.ai/managed stops wva serving it", func(t *testing.T) {
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := sos.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			a := cur.GetAnnotations()
			delete(a, llmdv1alpha1.AnnotationManaged)
			cur.SetAnnotations(a)
			_, err = sos.Update(ctx, cur, metav1.UpdateOptions{})
			return err
		}))
		servedNeither("neither the scaler nor the metrics API serves llama-upstream-so")
		// wva never wrote the user's ScaledObject: its generation is the
		// one our create left (annotations do not bump it), and no field
		// manager is wva's.
		cur, err := sos.Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, created.GetGeneration(), cur.GetGeneration())
		for _, mf := range cur.GetManagedFields() {
			assert.NotContains(t, mf.Manager, "wva", "field manager %s", mf.Manager)
		}
	})
}
