package daemon

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/generated/clientset/versioned"
)

// Clients builds the Kubernetes and wva typed clients every daemon uses.
func Clients(cfg *rest.Config) (kubernetes.Interface, versioned.Interface, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	wva, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	return kube, wva, nil
}

// EventRecorder records Events through kube from component, on a scheme
// that knows VariantAutoscaling (without it the recorder cannot reference
// a VA and drops its Events). The caller shuts the broadcaster down when
// it stops.
func EventRecorder(kube kubernetes.Interface, component string) (record.EventRecorder, record.EventBroadcaster) {
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	evScheme := scheme.Scheme
	_ = llmdv1alpha1.AddToScheme(evScheme)
	return broadcaster.NewRecorder(evScheme, corev1.EventSource{Component: component}), broadcaster
}
