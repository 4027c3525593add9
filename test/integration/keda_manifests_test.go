package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	wvaadapter "github.com/wva-project/wva/pkg/adapter"
	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/controller"
	"github.com/wva-project/wva/test/harness"
	"github.com/wva-project/wva/test/testenv"
)

func byKey(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	out := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		out[objKey(o)] = o
	}
	return out
}

func typed[T any](t *testing.T, o *unstructured.Unstructured) *T {
	t.Helper()
	require.NotNil(t, o)
	var out T
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &out))
	return &out
}

// TestKedaManifestsRender: deploy/keda is deploy/default without the
// APIService and the HPA controller's external-metrics access, with the
// adapter serving the external scaler and the controller making
// ScaledObjects; every object it shares with deploy/default is identical,
// so the copies cannot drift.
func TestKedaManifestsRender(t *testing.T) {
	t.Parallel()
	def, keda := byKey(renderDefault(t)), byKey(render(t, "deploy/keda"))
	// true: only in deploy/default; false: in deploy/keda, changed or added.
	dropped := map[string]bool{
		"apiregistration.k8s.io/v1/APIService /v1beta1.external.metrics.k8s.io":        true,
		"rbac.authorization.k8s.io/v1/ClusterRole /wva-external-metrics-reader":        true,
		"rbac.authorization.k8s.io/v1/ClusterRoleBinding /wva-external-metrics-reader": true,
		"rbac.authorization.k8s.io/v1/ClusterRole /wva-controller-keda":                false,
		"rbac.authorization.k8s.io/v1/ClusterRoleBinding /wva-controller-keda":         false,
		"apps/v1/Deployment wva-system/wva-adapter":                                    false,
		"v1/Service wva-system/wva-adapter":                                            false,
		"apps/v1/Deployment wva-system/wva-controller":                                 false,
		// certificates.yaml: the scaler's mutual TLS.
		"cert-manager.io/v1/ClusterIssuer /wva-keda-selfsigned":          false,
		"cert-manager.io/v1/Certificate cert-manager/wva-keda-ca":        false,
		"cert-manager.io/v1/ClusterIssuer /wva-keda-ca":                  false,
		"cert-manager.io/v1/Certificate wva-system/wva-keda-scaler":      false,
		"cert-manager.io/v1/Certificate keda/wva-keda-client":            false,
		"keda.sh/v1alpha1/ClusterTriggerAuthentication /wva-keda-scaler": false,
		"networking.k8s.io/v1/NetworkPolicy wva-system/wva-adapter":      false,
	}
	for key, o := range def {
		drop, listed := dropped[key]
		switch {
		case drop:
			assert.NotContains(t, keda, key, "deploy/keda must not have %s", key)
		case listed:
			assert.Contains(t, keda, key)
		default:
			require.Contains(t, keda, key, "deploy/keda lacks %s of deploy/default", key)
			assert.True(t, equality.Semantic.DeepEqual(o.Object, keda[key].Object), "%s differs from deploy/default's copy", key)
		}
	}
	for key := range keda {
		if _, ok := def[key]; !ok {
			_, listed := dropped[key]
			assert.True(t, listed, "deploy/keda adds %s, not listed here", key)
		}
	}

	// The changed objects are deploy/default's with exactly these edits, so
	// any other change to deploy/default's must be made here too.
	const adapterKey, serviceKey, controllerKey = "apps/v1/Deployment wva-system/wva-adapter", "v1/Service wva-system/wva-adapter",
		"apps/v1/Deployment wva-system/wva-controller"
	adapter := typed[appsv1.Deployment](t, def[adapterKey])
	pod := &adapter.Spec.Template.Spec
	var args []string
	for _, a := range pod.Containers[0].Args {
		switch {
		case strings.HasPrefix(a, "--tls-cert-file="): // no APIService: a self-signed certificate will do
			args = append(args, "--cert-dir=/tmp/serving-cert")
		case strings.HasPrefix(a, "--tls-private-key-file="):
		default:
			args = append(args, a)
		}
	}
	const certDir = "/var/run/keda-scaler-cert/"
	const scalerContainerPort = 9090
	pod.Containers[0].Args = append(args, "--keda-scaler-address=:9090", "--keda-scaler-tls-cert-file="+certDir+"tls.crt",
		"--keda-scaler-tls-key-file="+certDir+"tls.key", "--keda-scaler-client-ca-file="+certDir+"ca.crt")
	pod.Containers[0].Ports = append(pod.Containers[0].Ports, corev1.ContainerPort{Name: "keda-scaler", ContainerPort: scalerContainerPort})
	pod.Containers[0].VolumeMounts = slices.DeleteFunc(pod.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "serving-cert" })
	pod.Containers[0].VolumeMounts = append(pod.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "keda-scaler-cert", MountPath: strings.TrimSuffix(certDir, "/"), ReadOnly: true})
	pod.Volumes = slices.DeleteFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == "serving-cert" })
	scalerSecret, _, _ := unstructured.NestedString(keda["cert-manager.io/v1/Certificate wva-system/wva-keda-scaler"].Object, "spec", "secretName")
	pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "keda-scaler-cert", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: scalerSecret}}})
	assert.Equal(t, adapter, typed[appsv1.Deployment](t, keda[adapterKey]), "deploy/keda's adapter = deploy/default's + the TLS scaler - the serving Secret")

	svc := typed[corev1.Service](t, def[serviceKey])
	svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "keda-scaler", Port: 9090, TargetPort: intstr.FromString("keda-scaler"),
		AppProtocol: ptr.To("grpc")})
	assert.Equal(t, svc, typed[corev1.Service](t, keda[serviceKey]), "deploy/keda's adapter Service = deploy/default's + the scaler port")
	scalerPort := svc.Spec.Ports[len(svc.Spec.Ports)-1]

	ctrlDefault := typed[appsv1.Deployment](t, def[controllerKey])
	ctrlDefault.Spec.Template.Spec.Containers[0].Args = append(ctrlDefault.Spec.Template.Spec.Containers[0].Args,
		"--output=scaledobject", "--keda-scaler-address=wva-adapter.wva-system.svc:9090",
		"--keda-trigger-authentication=ClusterTriggerAuthentication/wva-keda-scaler")
	assert.Equal(t, ctrlDefault, typed[appsv1.Deployment](t, keda[controllerKey]), "deploy/keda's controller = deploy/default's in ScaledObject mode")

	// The adapter's NetworkPolicy also admits KEDA, from its namespace, on
	// the scaler's container port.
	np := typed[networkingv1.NetworkPolicy](t, def["networking.k8s.io/v1/NetworkPolicy wva-system/wva-adapter"])
	np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{
		From:  []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "keda"}}}},
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(scalerContainerPort))}},
	})
	assert.Equal(t, np, typed[networkingv1.NetworkPolicy](t, keda["networking.k8s.io/v1/NetworkPolicy wva-system/wva-adapter"]),
		"deploy/keda's adapter NetworkPolicy = deploy/default's + KEDA on the scaler port")

	// The controller's flags parse and validate as the binary would, and
	// its scaler address is the adapter Service's port.
	ctrl := typed[appsv1.Deployment](t, keda[controllerKey])
	opts := controller.NewOptions()
	fs := pflag.NewFlagSet("controller", pflag.ContinueOnError)
	opts.AddFlags(fs)
	require.NoError(t, fs.Parse(ctrl.Spec.Template.Spec.Containers[0].Args[1:]))
	require.NoError(t, opts.Validate())
	assert.Equal(t, string(controller.OutputScaledObject), opts.Output)
	assert.Equal(t, fmt.Sprintf("%s.%s.svc:%d", svc.Name, svc.Namespace, scalerPort.Port), opts.KedaScalerAddress)

	// TLS fits together: the scaler's certificate names the address KEDA
	// dials, the trigger's authentication exists and gives KEDA the client
	// certificate's Secret (ca.crt, tls.crt, tls.key).
	host, _, _ := strings.Cut(opts.KedaScalerAddress, ":")
	dnsNames, _, _ := unstructured.NestedStringSlice(keda["cert-manager.io/v1/Certificate wva-system/wva-keda-scaler"].Object, "spec", "dnsNames")
	assert.Contains(t, dnsNames, host)
	auth, err := controller.ParseKedaAuthenticationRef(opts.KedaAuthentication)
	require.NoError(t, err)
	cta := keda["keda.sh/v1alpha1/"+auth.Kind+" /"+auth.Name]
	require.NotNil(t, cta, "--keda-trigger-authentication=%s names no object of deploy/keda", opts.KedaAuthentication)
	clientSecret, _, _ := unstructured.NestedString(keda["cert-manager.io/v1/Certificate keda/wva-keda-client"].Object, "spec", "secretName")
	refs, _, _ := unstructured.NestedSlice(cta.Object, "spec", "secretTargetRef")
	got := map[string]string{}
	for _, r := range refs {
		m := r.(map[string]any)
		assert.Equal(t, clientSecret, m["name"])
		got[m["parameter"].(string)] = m["key"].(string)
	}
	assert.Equal(t, map[string]string{"caCert": "ca.crt", "tlsClientCert": "tls.crt", "tlsClientKey": "tls.key"}, got)

	// The adapter's own flags validate (the API server's flags are not ours).
	adapterOpts := wvaadapter.NewOptions()
	afs := pflag.NewFlagSet("adapter", pflag.ContinueOnError)
	afs.ParseErrorsAllowlist.UnknownFlags = true
	adapterOpts.AddFlags(afs)
	require.NoError(t, afs.Parse(typed[appsv1.Deployment](t, keda[adapterKey]).Spec.Template.Spec.Containers[0].Args[1:]))
	adapterOpts.Complete()
	require.NoError(t, adapterOpts.Validate())
	assert.False(t, adapterOpts.KedaScalerInsecure)
	assert.NotEmpty(t, adapterOpts.KedaScalerTLS.ClientCAFile, "mutual TLS")
}

// TestKedaExampleScaledObject: examples/keda/scaledobject.yaml is what
// deploy/keda's controller builds for the example's VA, so the docs do not lie.
func TestKedaExampleScaledObject(t *testing.T) {
	t.Parallel()
	var vaObj *unstructured.Unstructured
	for _, o := range render(t, "examples/keda") {
		if o.GetKind() == llmdv1alpha1.VariantAutoscalingKind {
			vaObj = o
		}
	}
	va := typed[llmdv1alpha1.VariantAutoscaling](t, vaObj)
	file, err := testenv.ReadYAMLObjects(filepath.Join(repoRoot(), "examples", "keda", "scaledobject.yaml"))
	require.NoError(t, err)
	require.Len(t, file, 1)
	example := file[0]
	md, _, _ := unstructured.NestedSlice(example.Object, "spec", "triggers")
	address, _, _ := unstructured.NestedString(md[0].(map[string]any), "metadata", "scalerAddress")
	// The authentication deploy/keda's controller sets.
	var auth *controller.KedaAuthenticationRef
	for _, a := range typed[appsv1.Deployment](t, byKey(render(t, "deploy/keda"))["apps/v1/Deployment wva-system/wva-controller"]).Spec.Template.Spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, "--keda-trigger-authentication="); ok {
			var err error
			auth, err = controller.ParseKedaAuthenticationRef(v)
			require.NoError(t, err)
		}
	}
	require.NotNil(t, auth)
	desired, err := controller.DesiredScaledObject(va, controller.KedaScaler{Address: address, Authentication: auth})
	require.NoError(t, err)
	desired.SetOwnerReferences(nil) // the VA's UID exists only in a cluster
	assert.Equal(t, viaJSON(t, desired).Object, viaJSON(t, example).Object)
	assert.True(t, strings.HasSuffix(address, ".svc:9090"), address)
}

// TestKedaManifestsAccess: examples/keda/scaledobject.yaml (not part of
// the kustomization, so not in TestManifestsServerSideDryRun) passes a
// strict server-side dry run with the ScaledObject CRD fixture, and
// deploy/keda's RBAC, applied for real, lets the controller keep
// ScaledObjects and no more on them.
func TestKedaManifestsAccess(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cluster := harness.StartT(t, harness.Options{})
	installCRD(ctx, t, cluster)
	testenv.InstallCRDFiles(ctx, t, cluster.RESTConfig, scaledObjectCRD())
	createNamespace(ctx, t, cluster.Clientset(), "wva-system")
	createNamespace(ctx, t, cluster.Clientset(), "llm")
	applier := mustApplier(t, cluster)

	example, err := testenv.ReadYAMLObjects(filepath.Join(repoRoot(), "examples", "keda", "scaledobject.yaml"))
	require.NoError(t, err)
	for _, o := range example {
		require.NoError(t, applier.Apply(ctx, o, true), objKey(o))
	}
	for _, o := range testenv.RBACObjects(render(t, "deploy/keda")) {
		require.NoError(t, applier.Apply(ctx, o, false), objKey(o))
	}
	assertAccess(ctx, t, cluster.Clientset(), "wva-system:wva-controller",
		[]access{{"list", "keda.sh", "scaledobjects", "", "", ""}, {"watch", "keda.sh", "scaledobjects", "", "", ""},
			{"create", "keda.sh", "scaledobjects", "", "llm", ""}, {"update", "keda.sh", "scaledobjects", "", "llm", "x"},
			{"delete", "autoscaling", "horizontalpodautoscalers", "", "llm", "x"}, // an HPA left from --output=hpa
			{"update", "apps", "deployments", "scale", "llm", "x"},                // steps inside KEDA's HPA tolerance band
			{"update", "llmd.ai", "variantautoscalings", "status", "llm", "x"}},
		[]access{{"delete", "keda.sh", "scaledobjects", "", "llm", "x"}, // the garbage collector's job
			{"create", "keda.sh", "scaledjobs", "", "llm", ""}, {"create", "keda.sh", "triggerauthentications", "", "llm", ""}})
	assertAccess(ctx, t, cluster.Clientset(), "wva-system:wva-adapter",
		[]access{{"create", "", "configmaps", "", "wva-system", ""}, {"update", "", "configmaps", "", "wva-system", "wva-last-good-config"},
			{"watch", "", "configmaps", "", "llm", "wva-saturation-scaling-config"}, {"update", "", "configmaps", "", "wva-system", "wva-analyzer-state"},
			{"update", "", "configmaps", "", "wva-system", "wva-optin-decisions"}, {"watch", "autoscaling", "horizontalpodautoscalers", "", "", ""},
			{"patch", "", "pods", "", "llm", "x"}},
		[]access{{"update", "", "configmaps", "", "wva-system", "wva-saturation-scaling-config"}, {"create", "", "configmaps", "", "llm", ""},
			{"update", "autoscaling", "horizontalpodautoscalers", "", "llm", "x"},
			{"list", "", "configmaps", "", "llm", ""}})
}

// viaJSON decodes u as the API server's JSON would: integers as int64
// (YAML decoding gives float64).
func viaJSON(t *testing.T, u *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	raw, err := u.MarshalJSON()
	require.NoError(t, err)
	out := &unstructured.Unstructured{}
	require.NoError(t, out.UnmarshalJSON(raw))
	return out
}
