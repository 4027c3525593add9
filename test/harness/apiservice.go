package harness

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// APIServiceGVR is apiregistration.k8s.io/v1 apiservices.
var APIServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// APIServiceOptions describes an extension apiserver listening on
// 127.0.0.1:Port, to be registered with the aggregator.
type APIServiceOptions struct {
	Group   string // e.g. "external.metrics.k8s.io"
	Version string // e.g. "v1beta1"
	// Port is the loopback port the extension apiserver serves HTTPS on.
	Port int
	// Namespace and Name of the Service created for it (defaults "default"
	// and "wva-test-<group with dots as dashes>"). The aggregator verifies
	// the serving cert for DNS name "<Name>.<Namespace>.svc" (see
	// Cluster.IssueServingCert).
	Namespace, ServiceName string
	// CABundle verifies the serving cert; nil means InsecureSkipTLSVerify.
	CABundle []byte
	// Priorities (defaults 100 and 100).
	GroupPriorityMinimum, VersionPriority int64
}

// ServiceName returns the Service name RegisterAPIService uses for opts.
func (o APIServiceOptions) serviceName() string {
	if o.ServiceName != "" {
		return o.ServiceName
	}
	return "wva-test-" + strings.ReplaceAll(o.Group, ".", "-")
}

func (o APIServiceOptions) namespace() string {
	if o.Namespace != "" {
		return o.Namespace
	}
	return "default"
}

// ServiceDNSName is the name the aggregator expects in the serving cert.
func (o APIServiceOptions) ServiceDNSName() string {
	return o.serviceName() + "." + o.namespace() + ".svc"
}

// RegisterAPIService makes the aggregator route /apis/<Group>/<Version> to
// https://127.0.0.1:<Port>: it creates (or updates) a selector-less Service,
// an EndpointSlice pointing at 127.0.0.1, and the APIService.
//
// How it reaches loopback: Endpoints/EndpointSlices of address type IPv4
// may not hold 127.0.0.0/8, so with aggregator routing (the default) the
// slice has address type FQDN and address "127.0.0.1", which the aggregator
// dials as is. With DisableAggregatorRouting, an ExternalName Service
// "127.0.0.1" is used instead.
func (c *Cluster) RegisterAPIService(ctx context.Context, opts APIServiceOptions) error {
	if opts.Group == "" || opts.Version == "" || opts.Port <= 0 {
		return errors.New("harness: RegisterAPIService needs Group, Version and Port")
	}
	cfg := rest.CopyConfig(c.RESTConfig)
	cfg.WarningHandler = rest.NoWarnings{} // "FQDN endpoints are deprecated"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ns, name := opts.namespace(), opts.serviceName()
	const svcPort = 443

	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{
			Ports: []corev1.ServicePort{{Name: "https", Port: svcPort, TargetPort: intstr.FromInt32(int32(opts.Port))}},
		},
	}
	apiPort := int64(svcPort)
	if c.opts.DisableAggregatorRouting {
		svc.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "127.0.0.1"}
		apiPort = int64(opts.Port) // an ExternalName service is dialled at the APIService port
	}
	if err := createOrReplace(ctx,
		func() error { _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); return err },
		func() error {
			old, err := cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if old.Spec.Type != svc.Spec.Type {
				if err := cs.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
					return err
				}
				_, err = cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
				return err
			}
			old.Spec.Ports, old.Spec.ExternalName = svc.Spec.Ports, svc.Spec.ExternalName
			_, err = cs.CoreV1().Services(ns).Update(ctx, old, metav1.UpdateOptions{})
			return err
		}); err != nil {
		return fmt.Errorf("harness: service %s/%s: %w", ns, name, err)
	}

	if !c.opts.DisableAggregatorRouting {
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				Name:      name,
				Namespace: ns,
				Labels: map[string]string{
					discoveryv1.LabelServiceName: name,
					discoveryv1.LabelManagedBy:   "wva-test-harness",
				},
			},
			AddressType: discoveryv1.AddressTypeFQDN,
			Endpoints: []discoveryv1.Endpoint{{
				Addresses:  []string{"127.0.0.1"},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			}},
			Ports: []discoveryv1.EndpointPort{{
				Name:     ptr.To("https"),
				Port:     ptr.To(int32(opts.Port)),
				Protocol: ptr.To(corev1.ProtocolTCP),
			}},
		}
		if err := createOrReplace(ctx,
			func() error {
				_, err := cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{})
				return err
			},
			func() error {
				old, err := cs.DiscoveryV1().EndpointSlices(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				old.Endpoints, old.Ports = slice.Endpoints, slice.Ports
				_, err = cs.DiscoveryV1().EndpointSlices(ns).Update(ctx, old, metav1.UpdateOptions{})
				return err
			}); err != nil {
			return fmt.Errorf("harness: endpointslice %s/%s: %w", ns, name, err)
		}
	}

	gp, vp := opts.GroupPriorityMinimum, opts.VersionPriority
	if gp == 0 {
		gp = 100
	}
	if vp == 0 {
		vp = 100
	}
	spec := map[string]any{
		"group":                opts.Group,
		"version":              opts.Version,
		"groupPriorityMinimum": gp,
		"versionPriority":      vp,
		"service":              map[string]any{"namespace": ns, "name": name, "port": apiPort},
	}
	if len(opts.CABundle) > 0 {
		spec["caBundle"] = base64.StdEncoding.EncodeToString(opts.CABundle)
	} else {
		spec["insecureSkipTLSVerify"] = true
	}
	apiSvcName := opts.Version + "." + opts.Group
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": apiSvcName},
		"spec":       spec,
	}}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	api := dyn.Resource(APIServiceGVR)
	if err := createOrReplace(ctx,
		func() error { _, err := api.Create(ctx, obj, metav1.CreateOptions{}); return err },
		func() error {
			old, err := api.Get(ctx, apiSvcName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			old.Object["spec"] = spec
			_, err = api.Update(ctx, old, metav1.UpdateOptions{})
			return err
		}); err != nil {
		return fmt.Errorf("harness: apiservice %s: %w", apiSvcName, err)
	}
	return nil
}

// WaitAPIServiceAvailable waits until APIService name (e.g.
// "v1beta1.external.metrics.k8s.io") has condition Available=True and the
// aggregator serves its group version. The condition is written by the
// availability controller; the proxy handler learns of it from the
// registration controller, a moment later, and answers 503 ("the server
// is currently unable to handle the request") until then. On timeout the
// error carries the last condition message or proxy error.
func (c *Cluster) WaitAPIServiceAvailable(ctx context.Context, name string) error {
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		return err
	}
	version, group, _ := strings.Cut(name, ".")
	discovery := c.Clientset().Discovery().RESTClient()
	last := "not found"
	for {
		obj, err := dyn.Resource(APIServiceGVR).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			last = "no Available condition"
			conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
			for _, ci := range conds {
				cond, _ := ci.(map[string]any)
				if cond["type"] != "Available" {
					continue
				}
				last = fmt.Sprintf("%v: %v", cond["reason"], cond["message"])
				if cond["status"] != "True" {
					break
				}
				_, err := discovery.Get().AbsPath("/apis", group, version).DoRaw(ctx)
				if err == nil {
					return nil
				}
				last = "Available, but the aggregator's proxy answers: " + err.Error()
			}
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("harness: APIService %s not available: %s", name, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func createOrReplace(ctx context.Context, create, update func() error) error {
	err := create()
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	for range 5 {
		if err = update(); !apierrors.IsConflict(err) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return err
}
