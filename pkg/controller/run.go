package controller

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	autoscalingv2informers "k8s.io/client-go/informers/autoscaling/v2"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/wva-project/wva/pkg/daemon"
	"github.com/wva-project/wva/pkg/generated/clientset/versioned"
	wvainformers "github.com/wva-project/wva/pkg/generated/informers/externalversions"
	wvainformersv1alpha1 "github.com/wva-project/wva/pkg/generated/informers/externalversions/llmd/v1alpha1"
)

// Run is `wva controller`: it builds clients and informers, probes the
// cluster's HPA capabilities, and reconciles until ctx ends.
func Run(ctx context.Context, o *Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	cfg, kube, wva, err := newClients(o)
	if err != nil {
		return err
	}
	caps, err := hpaCapabilities(ctx, kube, o)
	if err != nil {
		return err
	}
	mapper, scales, err := newScaleClient(cfg, kube)
	if err != nil {
		return err
	}
	recorder, broadcaster := daemon.EventRecorder(kube, "wva-controller")
	defer broadcaster.Shutdown()
	inf := newControllerInformers(kube, wva, o)
	c, err := newController(o, kube, wva, inf, mapper, scales, recorder, caps)
	if err != nil {
		return err
	}
	if err := inf.watch(c, cfg, kube, o); err != nil {
		return err
	}
	if err := daemon.Serve(ctx, o.Endpoints, kube, prometheus.Gatherers{legacyregistry.DefaultGatherer}, inf.ready, nil); err != nil {
		return err
	}
	if err := inf.startAndSync(ctx); err != nil {
		return err
	}
	var leading atomic.Bool
	return daemon.RunLeaderElected(ctx, kube, o.Lease, recorder, leading.Store, func(ctx context.Context) { c.Run(ctx, o.Workers) })
}

// newClients builds the REST config and the Kubernetes and wva clients.
func newClients(o *Options) (*rest.Config, kubernetes.Interface, versioned.Interface, error) {
	cfg, err := daemon.RESTConfig(o.Kubeconfig)
	if err != nil {
		return nil, nil, nil, err
	}
	kube, wva, err := daemon.Clients(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	return cfg, kube, wva, nil
}

// hpaCapabilities are the HPA features the controller may use: probed or
// set by flags for --output=hpa, none otherwise.
func hpaCapabilities(ctx context.Context, kube kubernetes.Interface, o *Options) (Capabilities, error) {
	// KEDA makes the HPA in ScaledObject mode; wva sets no tolerance there
	// and leaves 0 <-> 1 to KEDA, so the probes would not change anything.
	var caps Capabilities
	if Output(o.Output) == OutputHPA {
		var err error
		if caps, err = capabilities(ctx, kube, o); err != nil {
			return caps, err
		}
		klog.InfoS("HPA capabilities", "tolerance", caps.Tolerance, "scaleToZero", caps.ScaleToZero)
	}
	return caps, nil
}

// newScaleClient builds the client of the scale subresource of any
// workload kind, with the REST mapper that resolves kinds.
func newScaleClient(cfg *rest.Config, kube kubernetes.Interface) (meta.RESTMapper, scale.ScalesGetter, error) {
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	scales, err := scale.NewForConfig(cfg, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(kube.Discovery()))
	if err != nil {
		return nil, nil, err
	}
	return mapper, scales, nil
}

// controllerInformers are the informers the controller reads and the
// checks that they have synced.
type controllerInformers struct {
	kube informers.SharedInformerFactory
	wva  wvainformers.SharedInformerFactory
	// dyn watches ScaledObjects; nil unless --output=scaledobject.
	dyn    dynamicinformer.DynamicSharedInformerFactory
	va     wvainformersv1alpha1.VariantAutoscalingInformer
	hpa    autoscalingv2informers.HorizontalPodAutoscalerInformer
	synced []cache.InformerSynced
}

func newControllerInformers(kube kubernetes.Interface, wva versioned.Interface, o *Options) *controllerInformers {
	kubeInformers := informers.NewSharedInformerFactoryWithOptions(kube, o.Resync, informers.WithNamespace(o.WatchNamespace))
	wvaInformers := wvainformers.NewSharedInformerFactoryWithOptions(wva, o.Resync, wvainformers.WithNamespace(o.WatchNamespace))
	vaInformer := wvaInformers.Llmd().V1alpha1().VariantAutoscalings()
	hpaInformer := kubeInformers.Autoscaling().V2().HorizontalPodAutoscalers()
	return &controllerInformers{kube: kubeInformers, wva: wvaInformers, va: vaInformer, hpa: hpaInformer}
}

// newController builds the controller on the informers' listers and its
// work queue.
func newController(o *Options, kube kubernetes.Interface, wva versioned.Interface, inf *controllerInformers,
	mapper meta.RESTMapper, scales scale.ScalesGetter, recorder record.EventRecorder, caps Capabilities) (*Controller, error) {
	auth, err := ParseKedaAuthenticationRef(o.KedaAuthentication) // validated
	if err != nil {
		return nil, err
	}
	c := &Controller{
		Kube: kube, WVA: wva, VAs: inf.va.Lister(), HPAs: inf.hpa.Lister(), Scales: scales, Mapper: mapper,
		Recorder: recorder, Clock: clock.RealClock{}, Caps: caps, StaleAfter: o.StaleAfter,
		Output: Output(o.Output), KedaScaler: KedaScaler{Address: o.KedaScalerAddress, Authentication: auth},
	}
	c.NewQueue()
	return c, nil
}

// watch adds c's handlers to the informers, and with --output=scaledobject
// watches ScaledObjects too (KEDA's CRD must be served).
func (inf *controllerInformers) watch(c *Controller, cfg *rest.Config, kube kubernetes.Interface, o *Options) error {
	vaHandler, ownedHandler := c.Handlers()
	if _, err := inf.va.Informer().AddEventHandler(vaHandler); err != nil {
		return err
	}
	if _, err := inf.hpa.Informer().AddEventHandler(ownedHandler); err != nil {
		return err
	}
	inf.synced = []cache.InformerSynced{inf.va.Informer().HasSynced, inf.hpa.Informer().HasSynced}
	if c.Output == OutputScaledObject {
		// Without KEDA the informer would never sync and the controller
		// would sit unready without saying why.
		if !daemon.APIServed(kube, ScaledObjectGVR) {
			return fmt.Errorf("--output=scaledobject: the API server does not serve %s; install KEDA (its ScaledObject CRD) first",
				ScaledObjectGVR.GroupResource().String()+"/"+ScaledObjectGVR.Version)
		}
		var err error
		if c.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
			return err
		}
		inf.dyn = dynamicinformer.NewFilteredDynamicSharedInformerFactory(c.Dynamic, o.Resync, o.WatchNamespace, nil)
		soInformer := inf.dyn.ForResource(ScaledObjectGVR)
		c.ScaledObjects = soInformer.Lister()
		if _, err := soInformer.Informer().AddEventHandler(ownedHandler); err != nil {
			return err
		}
		inf.synced = append(inf.synced, soInformer.Informer().HasSynced)
	}
	return nil
}

// ready: the controller is ready once its informers have synced.
func (inf *controllerInformers) ready() error {
	for _, ok := range inf.synced {
		if !ok() {
			return errors.New("informers not synced")
		}
	}
	return nil
}

// startAndSync starts the informers and waits for their caches.
func (inf *controllerInformers) startAndSync(ctx context.Context) error {
	inf.kube.Start(ctx.Done())
	inf.wva.Start(ctx.Done())
	if inf.dyn != nil {
		inf.dyn.Start(ctx.Done())
	}
	if !cache.WaitForCacheSync(ctx.Done(), inf.synced...) {
		return errors.New("informers did not sync")
	}
	return nil
}

func capabilities(ctx context.Context, kube kubernetes.Interface, o *Options) (Capabilities, error) {
	var caps Capabilities
	if o.HPATolerance == "auto" || o.HPAScaleToZero == "auto" {
		probed, err := ProbeCapabilities(ctx, kube, o.ProbeNamespace)
		if err != nil {
			return caps, fmt.Errorf("%w (or set --hpa-tolerance and --hpa-scale-to-zero explicitly)", err)
		}
		caps = probed
	}
	if o.HPATolerance != "auto" {
		caps.Tolerance = o.HPATolerance == "true"
	}
	if o.HPAScaleToZero != "auto" {
		caps.ScaleToZero = o.HPAScaleToZero == "true"
	}
	return caps, nil
}
