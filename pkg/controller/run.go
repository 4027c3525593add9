package controller

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/daemon"
	"github.com/wva-project/wva/pkg/generated/clientset/versioned"
	wvainformers "github.com/wva-project/wva/pkg/generated/informers/externalversions"
)

// Run is `wva controller`: it builds clients and informers, probes the
// cluster's HPA capabilities, and reconciles until ctx ends.
func Run(ctx context.Context, o *Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	cfg, err := daemon.RESTConfig(o.Kubeconfig)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	wva, err := versioned.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// KEDA makes the HPA in ScaledObject mode; wva sets no tolerance there
	// and leaves 0 <-> 1 to KEDA, so the probes would not change anything.
	var caps Capabilities
	if Output(o.Output) == OutputHPA {
		if caps, err = capabilities(ctx, kube, o); err != nil {
			return err
		}
		klog.InfoS("HPA capabilities", "tolerance", caps.Tolerance, "scaleToZero", caps.ScaleToZero)
	}

	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	scales, err := scale.NewForConfig(cfg, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(kube.Discovery()))
	if err != nil {
		return err
	}
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	evScheme := scheme.Scheme
	_ = llmdv1alpha1.AddToScheme(evScheme)
	recorder := broadcaster.NewRecorder(evScheme, corev1.EventSource{Component: "wva-controller"})

	kubeInformers := informers.NewSharedInformerFactoryWithOptions(kube, o.Resync, informers.WithNamespace(o.WatchNamespace))
	wvaInformers := wvainformers.NewSharedInformerFactoryWithOptions(wva, o.Resync, wvainformers.WithNamespace(o.WatchNamespace))
	vaInformer := wvaInformers.Llmd().V1alpha1().VariantAutoscalings()
	hpaInformer := kubeInformers.Autoscaling().V2().HorizontalPodAutoscalers()
	auth, err := ParseKedaAuthenticationRef(o.KedaAuthentication) // validated
	if err != nil {
		return err
	}
	c := &Controller{
		Kube: kube, WVA: wva, VAs: vaInformer.Lister(), HPAs: hpaInformer.Lister(), Scales: scales, Mapper: mapper,
		Recorder: recorder, Clock: clock.RealClock{}, Caps: caps, StaleAfter: o.StaleAfter,
		Output: Output(o.Output), KedaScaler: KedaScaler{Address: o.KedaScalerAddress, Authentication: auth},
	}
	c.NewQueue()
	vaHandler, ownedHandler := c.Handlers()
	if _, err := vaInformer.Informer().AddEventHandler(vaHandler); err != nil {
		return err
	}
	if _, err := hpaInformer.Informer().AddEventHandler(ownedHandler); err != nil {
		return err
	}
	synced := []cache.InformerSynced{vaInformer.Informer().HasSynced, hpaInformer.Informer().HasSynced}
	var dynInformers dynamicinformer.DynamicSharedInformerFactory
	if c.Output == OutputScaledObject {
		// Without KEDA the informer would never sync and the controller
		// would sit unready without saying why.
		if !daemon.APIServed(kube, ScaledObjectGVR) {
			return fmt.Errorf("--output=scaledobject: the API server does not serve %s; install KEDA (its ScaledObject CRD) first",
				ScaledObjectGVR.GroupResource().String()+"/"+ScaledObjectGVR.Version)
		}
		if c.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
			return err
		}
		dynInformers = dynamicinformer.NewFilteredDynamicSharedInformerFactory(c.Dynamic, o.Resync, o.WatchNamespace, nil)
		soInformer := dynInformers.ForResource(ScaledObjectGVR)
		c.ScaledObjects = soInformer.Lister()
		if _, err := soInformer.Informer().AddEventHandler(ownedHandler); err != nil {
			return err
		}
		synced = append(synced, soInformer.Informer().HasSynced)
	}

	var leading atomic.Bool
	ready := func() error {
		for _, ok := range synced {
			if !ok() {
				return errors.New("informers not synced")
			}
		}
		return nil
	}
	if err := daemon.Serve(ctx, o.Endpoints, kube, prometheus.Gatherers{legacyregistry.DefaultGatherer}, ready, nil); err != nil {
		return err
	}
	kubeInformers.Start(ctx.Done())
	wvaInformers.Start(ctx.Done())
	if dynInformers != nil {
		dynInformers.Start(ctx.Done())
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return errors.New("informers did not sync")
	}
	return daemon.RunLeaderElected(ctx, kube, o.Lease, recorder, leading.Store, func(ctx context.Context) { c.Run(ctx, o.Workers) })
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
