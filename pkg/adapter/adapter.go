package adapter

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	cmmetrics "sigs.k8s.io/custom-metrics-apiserver/pkg/apiserver/metrics"
	basecmd "sigs.k8s.io/custom-metrics-apiserver/pkg/cmd"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/budget"
	"github.com/wva-project/wva/pkg/collector"
	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/daemon"
	"github.com/wva-project/wva/pkg/decide"
	"github.com/wva-project/wva/pkg/deletioncost"
	"github.com/wva-project/wva/pkg/engine"
	"github.com/wva-project/wva/pkg/generated/clientset/versioned"
	wvainformers "github.com/wva-project/wva/pkg/generated/informers/externalversions"
	"github.com/wva-project/wva/pkg/inferencepool"
	"github.com/wva-project/wva/pkg/inventory"
	"github.com/wva-project/wva/pkg/kedascaler"
	"github.com/wva-project/wva/pkg/provider"
)

// Adapter is a configured, not yet running, `wva adapter`.
type Adapter struct {
	Base     *basecmd.AdapterBase
	Options  *Options
	Registry *prometheus.Registry
	Engine   *engine.Engine
	Provider *provider.Provider
	Config   *config.Store
	// Scaler is the KEDA external scaler; nil unless --keda-scaler-address.
	Scaler *kedascaler.Scaler

	kube       kubernetes.Interface
	informers  informers.SharedInformerFactory
	cmInformer informers.SharedInformerFactory
	wva        wvainformers.SharedInformerFactory
	dyn        dynamicinformer.DynamicSharedInformerFactory
	// keda: the ScaledObject API is served; opted-in ScaledObjects are read.
	keda bool
	// pools are the InferencePools (nil when the API is not served).
	pools *inferencepool.Source
	// budgetStart and budgetSynced are the GPU budget's informers (nil
	// when no budget is configured).
	budgetStart  []func(<-chan struct{})
	budgetSynced []cache.InformerSynced
	recorder     record.EventRecorder
	broadcast    record.EventBroadcaster
	leading      atomic.Bool
	// synced is set once every informer has synced.
	synced atomic.Bool
	// localCM watch the namespace-local ConfigMaps (none when RBAC does
	// not allow it).
	localCM []informers.SharedInformerFactory
	// unlabeled logs ConfigMaps ignored for lack of the label once each.
	unlabeled unlabeledLog
	// cmHandlerSynced: the ConfigMap handlers have applied the initial
	// lists, so the store is complete before the leader persists it.
	cmHandlerSynced []cache.InformerSynced
	lastGood        configMapPersister
	optIn           optInDecisions
	state           StatePersister
	invalidGauge    *invalidGauge
}

// New builds the adapter. base must have had InstallFlags called and its
// flags parsed.
func New(base *basecmd.AdapterBase, opts *Options) (*Adapter, error) {
	opts.Complete()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	restCfg, err := base.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config: %w", err)
	}
	a := &Adapter{Base: base, Options: opts, Registry: prometheus.NewRegistry(), Config: config.NewStore()}
	a.pinSettings()
	// Go and process collectors come from the API server's legacy registry,
	// gathered next to this one on /metrics.
	if err := cmmetrics.RegisterMetrics(legacyregistry.Register); err != nil {
		return nil, err
	}
	wvaClient, err := a.newInformers(restCfg)
	if err != nil {
		return nil, err
	}
	a.newEventRecorder()
	inv, err := a.newInventory(restCfg)
	if err != nil {
		return nil, err
	}
	if err := a.newEngine(inv, wvaClient); err != nil {
		return nil, err
	}
	if err := a.newPools(restCfg); err != nil {
		return nil, err
	}
	if err := a.newBudget(); err != nil {
		return nil, err
	}
	a.newPersisters(inv)
	a.serveDecisions(inv)
	a.watch()
	return a, nil
}

// pinSettings pins the settings given on the command line over every
// ConfigMap entry.
func (a *Adapter) pinSettings() {
	opts := a.Options
	a.Config.Pin(opts.Pinned)
	if len(opts.Pinned.Keys) > 0 {
		klog.InfoS("settings pinned over every ConfigMap entry", "keys", opts.Pinned.Keys)
	}
}

// newInformers builds the clients and the informer factories of the
// watched namespace and the ConfigMap namespaces; it returns the wva
// client the engine writes statuses with.
func (a *Adapter) newInformers(restCfg *rest.Config) (versioned.Interface, error) {
	opts := a.Options
	kube, wvaClient, err := daemon.Clients(restCfg)
	if err != nil {
		return nil, err
	}
	a.kube = kube
	nsOpt := informers.WithNamespace(opts.WatchNamespace)
	a.informers = informers.NewSharedInformerFactoryWithOptions(a.kube, 0, nsOpt)
	a.cmInformer = informers.NewSharedInformerFactoryWithOptions(a.kube, 0, informers.WithNamespace(opts.ConfigNamespace))
	a.localCM = localConfigMapInformers(context.Background(), a.kube, opts.WatchNamespace, opts.ConfigNamespace)
	a.wva = wvainformers.NewSharedInformerFactoryWithOptions(wvaClient, 0, wvainformers.WithNamespace(opts.WatchNamespace))
	return wvaClient, nil
}

// newEventRecorder starts the broadcaster of the adapter's Events.
func (a *Adapter) newEventRecorder() {
	a.recorder, a.broadcast = daemon.EventRecorder(a.kube, "wva-adapter")
}

// newInventory builds the engine's view of the variants from the
// informers' caches, the LWS and KEDA APIs included when served.
func (a *Adapter) newInventory(restCfg *rest.Config) (*inventory.Inventory, error) {
	opts := a.Options
	// Trim what the inventory does not read: these caches hold every pod,
	// Deployment and StatefulSet watched.
	for inf, transform := range map[cache.SharedIndexInformer]cache.TransformFunc{
		a.informers.Core().V1().Pods().Informer():         inventory.PodTransform,
		a.informers.Apps().V1().Deployments().Informer():  inventory.DeploymentTransform,
		a.informers.Apps().V1().StatefulSets().Informer(): inventory.StatefulSetTransform,
	} {
		if err := inf.SetTransform(transform); err != nil {
			return nil, err
		}
	}
	inv := &inventory.Inventory{
		VAs:          a.wva.Llmd().V1alpha1().VariantAutoscalings().Lister(),
		Deployments:  a.informers.Apps().V1().Deployments().Lister(),
		StatefulSets: a.informers.Apps().V1().StatefulSets().Lister(),
		Pods:         a.informers.Core().V1().Pods().Lister(),
		// HPAs opted in by annotations (upstream v0.9) are variants too.
		HPAs:   a.informers.Autoscaling().V2().HorizontalPodAutoscalers().Lister(),
		Memory: &inventory.Memory{},
		Warner: &inventory.Warner{Recorder: a.recorder, Left: inventory.NewLeftGauge(a.Registry)},
	}
	// The LWS and KEDA APIs are read when installed at start-up.
	lws := daemon.APIServed(a.kube, llmdv1alpha1.LeaderWorkerSetResource)
	a.keda = daemon.APIServed(a.kube, llmdv1alpha1.ScaledObjectResource)
	if lws || a.keda {
		dynClient, err := dynamic.NewForConfig(restCfg)
		if err != nil {
			return nil, err
		}
		a.dyn = dynamicinformer.NewFilteredDynamicSharedInformerFactory(dynClient, 0, opts.WatchNamespace, nil)
	}
	if lws {
		inv.LeaderWorkerSets = a.dyn.ForResource(llmdv1alpha1.LeaderWorkerSetResource).Lister()
	}
	if a.keda {
		// ScaledObjects opted in by the same annotations are variants too.
		inv.ScaledObjects = a.dyn.ForResource(llmdv1alpha1.ScaledObjectResource).Lister()
	}
	return inv, nil
}

// newEngine builds the engine: the inventory's variants, Prometheus'
// metrics, statuses written with wvaClient.
func (a *Adapter) newEngine(inv *inventory.Inventory, wvaClient versioned.Interface) error {
	opts := a.Options
	prom, err := collector.NewPrometheusAPI(collector.PrometheusOptions{URL: opts.PrometheusURL, CAFile: opts.PrometheusCAFile,
		InsecureSkipVerify: opts.PrometheusInsecureSkipVerify, BearerTokenFile: opts.PrometheusBearerTokenFile, Timeout: opts.PrometheusTimeout})
	if err != nil {
		return err
	}
	a.Engine = &engine.Engine{
		Views:           inv,
		Metrics:         collector.Collector{API: prom, Labels: collector.Labels{Namespace: opts.PrometheusNamespaceLabel, Pod: opts.PrometheusPodLabel}},
		Status:          inventory.StatusWriter{Next: engine.ClientStatusWriter{Client: wvaClient}, Memory: inv.Memory},
		Config:          a.Config,
		Pipeline:        decide.Default(),
		Recorder:        inventory.Recorder{EventRecorder: a.recorder},
		Observe:         engine.NewMetrics(a.Registry),
		Clock:           clock.RealClock{},
		Interval:        opts.EngineInterval,
		CycleTimeout:    opts.CycleTimeout,
		StatusHeartbeat: opts.StatusHeartbeat,
	}
	if opts.PodDeletionCost {
		a.Engine.Running = deletioncost.Prometheus{API: prom, Labels: collector.Labels{Namespace: opts.PrometheusNamespaceLabel, Pod: opts.PrometheusPodLabel}}
		a.Engine.DeletionCosts = deletioncost.Writer{Client: a.kube, Pods: inv.Pods}
	}
	return nil
}

// newPools watches InferencePools when the API is served, so each VA
// reports the pool that selects its pods and the pool's endpoint picker.
func (a *Adapter) newPools(restCfg *rest.Config) error {
	dynClient, err := dynamic.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	a.pools = inferencepool.NewSource(a.kube, dynClient, a.Options.WatchNamespace)
	if a.pools != nil {
		a.Engine.Pools = a.pools
	}
	return nil
}

// newBudget gives the engine the GPU budget's source, when one is
// configured.
func (a *Adapter) newBudget() error {
	opts := a.Options
	if opts.Budget.Enabled() {
		src, start, synced, err := budget.NewInformerSource(a.kube, opts.Budget.InformerOptions(opts.ConfigNamespace))
		if err != nil {
			return err
		}
		a.Engine.Budget = src
		// Validate has checked it.
		a.Engine.Unbudgeted = opts.Budget.Policy()
		a.budgetStart, a.budgetSynced = start, synced
	}
	return nil
}

// newPersisters builds what keeps state across leaders in ConfigMaps: the
// last good configuration, the opted-in variants' decisions and the
// analyzers' state.
func (a *Adapter) newPersisters(inv *inventory.Inventory) {
	opts := a.Options
	cmLister := a.cmInformer.Core().V1().ConfigMaps().Lister()
	a.lastGood = configMapPersister{kube: a.kube, namespace: opts.ConfigNamespace, name: config.LastGoodConfigMapName,
		data: a.Config.LastGood, lister: cmLister, retry: opts.EngineInterval, changed: make(chan struct{}, 1)}
	// Checked every engine interval, so a status heartbeat's new decidedAt
	// reaches the followers as a VA's does.
	a.optIn = optInDecisions{memory: inv.Memory, leading: a.leading.Load,
		configMapPersister: configMapPersister{kube: a.kube, namespace: opts.ConfigNamespace, name: OptInDecisionsConfigMapName,
			lister: cmLister, retry: opts.EngineInterval, changed: make(chan struct{}, 1)}}
	a.optIn.data = a.optIn.persisted
	a.state = StatePersister{Kube: a.kube, Namespace: opts.ConfigNamespace, Engine: a.Engine, Lister: cmLister}
	a.invalidGauge = newInvalidGauge(a.Registry)
}

// serveDecisions serves the decisions as external metrics and, with
// --keda-scaler-address, to KEDA; a changed opted-in decision is persisted
// and streamed.
func (a *Adapter) serveDecisions(inv *inventory.Inventory) {
	opts := a.Options
	decisions := inventory.Lister(inv.VAs, inv.Memory)
	a.Provider = provider.New(decisions, clock.RealClock{}, opts.StaleAfter, a.Registry)
	a.Base.WithExternalMetrics(a.Provider)
	if opts.KedaScalerAddress != "" {
		a.Scaler = kedascaler.New(decisions, opts.KedaScalerResendInterval, a.Registry)
	}
	inv.Memory.Changed = func() {
		a.optIn.notify()
		if a.Scaler != nil {
			a.Scaler.Notify()
		}
	}
}

// watch wires change triggers: VA spec changes and wva ConfigMaps.
func (a *Adapter) watch() {
	// KEDA's StreamIsActive streams re-check on every VA that appears, goes
	// or gets a new decision.
	notify := func() {
		if a.Scaler != nil {
			a.Scaler.Notify()
		}
	}
	trigger := func(any) { a.Engine.Trigger(); notify() }
	_, _ = a.wva.Llmd().V1alpha1().VariantAutoscalings().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: trigger,
		UpdateFunc: func(oldObj, newObj any) {
			decide, serve := vaChanged(oldObj.(*llmdv1alpha1.VariantAutoscaling), newObj.(*llmdv1alpha1.VariantAutoscaling))
			if decide {
				a.Engine.Trigger()
			}
			if serve {
				notify()
			}
		},
		DeleteFunc: trigger,
	})
	// Opted-in HPAs: spec and annotation changes, not the HPA controller's
	// status updates.
	_, _ = a.informers.Autoscaling().V2().HorizontalPodAutoscalers().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: trigger,
		UpdateFunc: func(oldObj, newObj any) {
			o, n := oldObj.(*autoscalingv2.HorizontalPodAutoscaler), newObj.(*autoscalingv2.HorizontalPodAutoscaler)
			if o.Generation != n.Generation || !maps.Equal(o.Annotations, n.Annotations) {
				trigger(newObj)
			}
		},
		DeleteFunc: trigger,
	})
	// Opted-in ScaledObjects: likewise, not KEDA's status updates.
	if a.keda {
		_, _ = a.dyn.ForResource(llmdv1alpha1.ScaledObjectResource).Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: trigger,
			UpdateFunc: func(oldObj, newObj any) {
				o, n := oldObj.(metav1.Object), newObj.(metav1.Object)
				if o.GetGeneration() != n.GetGeneration() || !maps.Equal(o.GetAnnotations(), n.GetAnnotations()) {
					trigger(newObj)
				}
			},
			DeleteFunc: trigger,
		})
	}
	// A pool added, changed or deleted changes the VAs' pool condition.
	a.pools.OnChange(a.Engine.Trigger)
	// Every replica applies the ConfigMaps (the engine may move to any of
	// them); the leader persists what is in force (lastGoodPersister).
	configChanged := func() {
		a.invalidGauge.sync(a.Config.Entries(), a.Config.Invalid())
		a.lastGood.notify()
		a.Engine.Trigger()
	}
	handler := a.configMapHandler(configChanged)
	if reg, err := a.cmInformer.Core().V1().ConfigMaps().Informer().AddEventHandler(handler); err == nil {
		a.cmHandlerSynced = append(a.cmHandlerSynced, reg.HasSynced)
	}
	for _, f := range a.localCM {
		if reg, err := f.Core().V1().ConfigMaps().Informer().AddEventHandler(a.localOnly(handler)); err == nil {
			a.cmHandlerSynced = append(a.cmHandlerSynced, reg.HasSynced)
		}
	}
}

// Run starts informers, the metrics endpoint, the engine (under leader
// election) and the external-metrics API server; it returns when ctx ends or
// the API server fails.
func (a *Adapter) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer a.broadcast.Shutdown()
	// Touch the informers the inventory needs so the factories start them.
	a.informers.Apps().V1().Deployments().Informer()
	a.informers.Apps().V1().StatefulSets().Informer()
	a.informers.Core().V1().Pods().Informer()
	a.informers.Autoscaling().V2().HorizontalPodAutoscalers().Informer()
	a.informers.Start(ctx.Done())
	a.cmInformer.Start(ctx.Done())
	for _, f := range a.localCM {
		f.Start(ctx.Done())
	}
	a.wva.Start(ctx.Done())
	if a.dyn != nil {
		a.dyn.Start(ctx.Done())
	}
	for _, start := range a.budgetStart {
		start(ctx.Done())
	}
	a.pools.Start(ctx.Done())
	if err := daemon.Serve(ctx, a.Options.Endpoints, a.kube, prometheus.Gatherers{a.Registry, legacyregistry.DefaultGatherer}, a.ready, a.live); err != nil {
		return err
	}
	for name, synced := range map[string]map[string]bool{
		"kube": typeNames(a.informers.WaitForCacheSync(ctx.Done())), "configmaps": typeNames(a.cmInformer.WaitForCacheSync(ctx.Done())),
		"wva": typeNames(a.wva.WaitForCacheSync(ctx.Done())),
	} {
		for typ, ok := range synced {
			if !ok {
				return fmt.Errorf("%s informer for %s did not sync", name, typ)
			}
		}
	}
	if a.dyn != nil {
		a.dyn.WaitForCacheSync(ctx.Done())
	}
	for _, f := range a.localCM {
		for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return fmt.Errorf("namespace-local ConfigMap informer for %s did not sync", typ)
			}
		}
	}
	if !cache.WaitForCacheSync(ctx.Done(), a.cmHandlerSynced...) {
		return errors.New("ConfigMap handler did not apply the initial ConfigMaps")
	}
	if !cache.WaitForCacheSync(ctx.Done(), a.pools.HasSynced) {
		return errors.New("InferencePool informer did not sync")
	}
	if !cache.WaitForCacheSync(ctx.Done(), a.budgetSynced...) {
		return errors.New("GPU budget informers (nodes, pods, budget ConfigMap) did not sync")
	}
	a.synced.Store(true)
	klog.InfoS("informers synced; starting engine", "interval", a.Options.EngineInterval, "leaderElect", a.Options.Lease.Enabled)

	if a.Scaler != nil {
		if !a.Options.KedaScalerInsecure {
			var err error
			if a.Scaler.TLS, err = kedascaler.ServerTLS(ctx, a.Options.KedaScalerTLS); err != nil {
				return fmt.Errorf("KEDA external scaler TLS: %w", err)
			}
		}
		lis, err := net.Listen("tcp", a.Options.KedaScalerAddress)
		if err != nil {
			return fmt.Errorf("--keda-scaler-address=%s: %w", a.Options.KedaScalerAddress, err)
		}
		klog.InfoS("serving the KEDA external scaler", "address", lis.Addr().String(), "tls", a.Scaler.TLS != nil,
			"mutualTLS", a.Options.KedaScalerTLS.ClientCAFile != "")
		go func() {
			if err := a.Scaler.ServeListener(ctx, lis); err != nil {
				klog.ErrorS(err, "KEDA external scaler stopped")
				cancel()
			}
		}()
	}
	go a.runEngine(ctx)
	return a.Base.Run(ctx)
}

func typeNames[T comparable](m map[T]bool) map[string]bool {
	out := map[string]bool{}
	for k, v := range m {
		out[fmt.Sprint(k)] = v
	}
	return out
}

func (a *Adapter) runEngine(ctx context.Context) {
	work := func(ctx context.Context) {
		go a.lastGood.run(ctx)
		// The previous leader's analyzer memory, before the first cycle;
		// saved by the engine's cycles only after it is loaded, so it is
		// never overwritten with a cold start.
		if err := a.state.Load(ctx); err != nil {
			klog.ErrorS(err, "loading analyzer state; analyzers start afresh", "configmap", klog.KRef(a.Options.ConfigNamespace, AnalyzerStateConfigMapName))
		}
		a.Engine.SaveState = a.state.Save
		// Likewise the opted-in variants' last decisions, served until the
		// engine decides them.
		if err := a.optIn.load(ctx); err != nil {
			klog.ErrorS(err, "loading opted-in decisions", "configmap", klog.KRef(a.Options.ConfigNamespace, OptInDecisionsConfigMapName))
		}
		go a.optIn.run(ctx)
		a.Engine.Run(ctx)
	}
	if err := daemon.RunLeaderElected(ctx, a.kube, a.Options.Lease, a.recorder, a.leading.Store, work); err != nil {
		klog.ErrorS(err, "engine not started")
	}
}

// ready: a follower is ready once its informers have synced (it serves
// from their caches); the leader also needs a recent successful cycle.
func (a *Adapter) ready() error {
	if !a.synced.Load() {
		return errors.New("informers not synced")
	}
	if a.leading.Load() {
		if age := a.Engine.Clock.Since(a.Engine.LastSuccess()); age > a.Options.ReadinessMaxCycleAge {
			return fmt.Errorf("leader: last successful engine cycle %s ago", age.Round(time.Second))
		}
	}
	return nil
}

// live: the leader's engine loop must keep ending cycles (a stuck loop
// holds the Lease and decides nothing; a restart hands it over). A follower
// is live.
func (a *Adapter) live() error {
	if !a.leading.Load() {
		return nil
	}
	return a.Engine.Live(a.Options.LivenessStaleAfter)
}

// vaChanged says whether a VA update calls for a new decision (a spec
// change, or a wake by the fast path: until the next cycle the gauge
// wva_desired_replicas still shows the decision of 0 that the wake
// overrode) and whether what the VA serves changed (KEDA's streams).
// wva's own status writes call for neither decision nor loop.
func vaChanged(o, n *llmdv1alpha1.VariantAutoscaling) (decide, serve bool) {
	woke := o.Annotations[llmdv1alpha1.AnnotationScaledFromZeroAt] != n.Annotations[llmdv1alpha1.AnnotationScaledFromZeroAt]
	decide = o.Generation != n.Generation || woke
	od, nd := o.Status.DesiredOptimizedAlloc, n.Status.DesiredOptimizedAlloc
	serve = od.NumReplicas != nd.NumReplicas || od.LastRunTime.IsZero() != nd.LastRunTime.IsZero() || o.ServedReplicas() != n.ServedReplicas()
	return decide, serve
}
