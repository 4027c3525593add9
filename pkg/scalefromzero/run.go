package scalefromzero

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/budget"
	"github.com/wva-project/wva/pkg/daemon"
	"github.com/wva-project/wva/pkg/generated/clientset/versioned"
	wvainformers "github.com/wva-project/wva/pkg/generated/informers/externalversions"
	"github.com/wva-project/wva/pkg/inferencepool"
	"github.com/wva-project/wva/pkg/tlsfiles"
)

// Run is `wva scale-from-zero`: informers, the poll loop (leader only), the
// optional activator (every replica) and /metrics, until ctx ends.
func Run(ctx context.Context, o *Options) error {
	o.Complete()
	if err := o.Validate(); err != nil {
		return err
	}
	cfg, err := daemon.RESTConfig(o.Kubeconfig)
	if err != nil {
		return err
	}
	// The default 5 QPS would queue a scale call behind events and
	// annotations during a burst of wake-ups.
	cfg.QPS, cfg.Burst = o.KubeAPIQPS, o.KubeAPIBurst
	kube, wva, err := daemon.Clients(cfg)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	metrics := NewMetrics(reg)

	recorder, broadcaster := daemon.EventRecorder(kube, "wva-scale-from-zero")
	defer broadcaster.Shutdown()

	w, err := newWatches(o, cfg, kube, wva)
	if err != nil {
		return err
	}
	waker, err := newWaker(o, cfg, kube, wva, w, recorder, metrics)
	if err != nil {
		return err
	}
	httpClient, err := eppClient(o)
	if err != nil {
		return err
	}
	runner := &Runner{
		State: w.state, Endpoints: w.endpoints, Waker: waker, Metrics: metrics, Interval: o.PollInterval,
		Scraper: NewScraper(httpClient, o.ScrapeTimeout, o.MaxConcurrentScrape, metrics.observeScrape),
	}
	if w.budgeted {
		runner.BudgetEvery = o.BudgetGaugesEvery
	}
	if err := serve(ctx, o, kube, reg, w, waker, metrics); err != nil {
		return err
	}
	klog.InfoS("informers synced; polling EPPs of groups at zero", "interval", o.PollInterval, "budget", w.budgeted, "leaderElect", o.Lease.Enabled)
	return daemon.RunLeaderElected(ctx, kube, o.Lease, recorder, nil, runner.Run)
}

// watches are the informer-backed sources of the daemon, with what it needs
// to start them and to wait for (and report) their sync.
type watches struct {
	state     *State
	endpoints EndpointSource
	budgeted  bool
	synced    []cache.InformerSynced
	starters  []func(<-chan struct{})
}

// newWatches builds the informers: VAs and scale targets always,
// LeaderWorkerSets when the API is served, EPP pods with --epp-selector,
// InferencePools when neither EPP flag is set, and nodes and the budget
// ConfigMap when a budget is configured.
func newWatches(o *Options, cfg *rest.Config, kube kubernetes.Interface, wva versioned.Interface) (*watches, error) {
	ns := informers.WithNamespace(o.WatchNamespace)
	kubeInf := informers.NewSharedInformerFactoryWithOptions(kube, 0, ns)
	wvaInf := wvainformers.NewSharedInformerFactoryWithOptions(wva, 0, wvainformers.WithNamespace(o.WatchNamespace))
	w := &watches{
		state: &State{
			VAs:          wvaInf.Llmd().V1alpha1().VariantAutoscalings().Lister(),
			Deployments:  kubeInf.Apps().V1().Deployments().Lister(),
			StatefulSets: kubeInf.Apps().V1().StatefulSets().Lister(),
		},
		synced: []cache.InformerSynced{
			wvaInf.Llmd().V1alpha1().VariantAutoscalings().Informer().HasSynced,
			kubeInf.Apps().V1().Deployments().Informer().HasSynced,
			kubeInf.Apps().V1().StatefulSets().Informer().HasSynced,
		},
		starters: []func(<-chan struct{}){kubeInf.Start, wvaInf.Start},
	}
	dynClient, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if daemon.APIServed(kube, llmdv1alpha1.LeaderWorkerSetResource) {
		dynInf := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dynClient, 0, o.WatchNamespace, nil)
		lws := dynInf.ForResource(llmdv1alpha1.LeaderWorkerSetResource)
		w.state.LeaderWorkerSets = lws.Lister()
		w.synced = append(w.synced, lws.Informer().HasSynced)
		w.starters = append(w.starters, dynInf.Start)
	}

	w.endpoints = StaticEndpoints(o.EPPURLs)
	if o.EPPSelector != "" {
		w.watchEPPPods(o, kube, ns, o.EPPSelector)
	}
	// The flags override discovery: without them the InferencePools name
	// the EPPs. Without the InferencePool API, the EPP pods are found by
	// the selector wva shipped before discovery, so an upgrade of a
	// cluster without InferencePools keeps waking its groups.
	if o.EPPSelector == "" && len(o.EPPURLs) == 0 {
		if pools := inferencepool.NewSource(kube, dynClient, o.WatchNamespace); pools != nil {
			w.endpoints = PoolEndpoints{Pools: pools, Scheme: o.EPPScheme, Port: o.EPPMetricsPort, Path: o.EPPMetricsPath}
			w.synced = append(w.synced, pools.HasSynced)
			w.starters = append(w.starters, pools.Start)
		} else {
			klog.InfoS("Finding endpoint pickers by pod selector", "selector", DefaultEPPSelector)
			w.watchEPPPods(o, kube, ns, DefaultEPPSelector)
		}
	}

	w.budgeted = o.Budget.Enabled()
	if w.budgeted {
		b, start, hasSynced, err := budget.NewInformerSource(kube, o.Budget.InformerOptions(o.ConfigNamespace))
		if err != nil {
			return nil, err
		}
		w.state.Budget = b
		w.synced = append(w.synced, hasSynced...)
		w.starters = append(w.starters, start...)
	}
	return w, nil
}

// DefaultEPPSelector finds EPP pods when neither flag names them and the
// InferencePool API is not served: the llm-d inference scheduler's label.
const DefaultEPPSelector = "app.kubernetes.io/component=epp"

// watchEPPPods finds the EPPs as the pods the selector matches.
func (w *watches) watchEPPPods(o *Options, kube kubernetes.Interface, ns informers.SharedInformerOption, selector string) {
	eppInf := informers.NewSharedInformerFactoryWithOptions(kube, 0, ns,
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = selector }))
	pods := eppInf.Core().V1().Pods()
	w.endpoints = PodEndpoints{Pods: pods.Lister(), Scheme: o.EPPScheme, Port: o.EPPMetricsPort, Path: o.EPPMetricsPath}
	w.synced = append(w.synced, pods.Informer().HasSynced)
	w.starters = append(w.starters, eppInf.Start)
}

// newWaker builds the waker on the scale subresource, so any kind with one
// (Deployment, StatefulSet, LeaderWorkerSet) can be woken.
func newWaker(o *Options, cfg *rest.Config, kube kubernetes.Interface, wva versioned.Interface, w *watches, recorder record.EventRecorder, metrics *Metrics) (*Waker, error) {
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	scales, err := scale.NewForConfig(cfg, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(kube.Discovery()))
	if err != nil {
		return nil, err
	}
	// Discovery now, not on the first wake-up.
	if _, err := mapper.RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "v1"); err != nil {
		klog.ErrorS(err, "warming the REST mapper")
	}
	return &Waker{
		State: w.state, Scaler: SubresourceScaler{Scales: scales, Mapper: mapper}, Marker: AnnotationMarker{Client: wva},
		Recorder: recorder, Metrics: metrics, Clock: clock.RealClock{}, Budgeted: w.budgeted, Unbudgeted: o.Budget.Policy(),
		WakeTimeout: o.WakeTimeout, RetryAfter: o.RetryAfter,
	}, nil
}

// serve starts /metrics and the probes, the informers and, once they have
// synced, the activator.
func serve(ctx context.Context, o *Options, kube kubernetes.Interface, reg *prometheus.Registry, w *watches, waker *Waker, metrics *Metrics) error {
	// Ready once the informers have synced and, with the activator on, it
	// listens: a Service must not route requests to a pod that refuses them.
	var activatorUp atomic.Bool
	ready := func() error {
		for _, s := range w.synced {
			if !s() {
				return errors.New("informers not synced")
			}
		}
		if o.ActivatorListen != "" && !activatorUp.Load() {
			return errors.New("activator not listening yet")
		}
		return nil
	}
	if err := daemon.Serve(ctx, o.Endpoints, kube, prometheus.Gatherers{reg, legacyregistry.DefaultGatherer}, ready, nil); err != nil {
		return err
	}
	for _, start := range w.starters {
		start(ctx.Done())
	}
	if !cache.WaitForCacheSync(ctx.Done(), w.synced...) {
		return errors.New("informers did not sync")
	}
	if o.ActivatorListen != "" {
		if err := serveActivator(ctx, o, waker, metrics); err != nil {
			return err
		}
		activatorUp.Store(true)
	}
	return nil
}

// eppClient is the HTTP client of the EPP scrapes. By default it sends no
// credentials. With --epp-bearer-token-file it adds the token, read from the
// file on every request, and only to https URLs whose certificate verifies
// against --epp-ca-file (Validate insists on both); it never follows a
// redirect, so the token cannot be bounced elsewhere.
func eppClient(o *Options) (*http.Client, error) {
	tlsCfg := &tls.Config{InsecureSkipVerify: o.EPPInsecureTLS, ServerName: o.EPPTLSServerName, MinVersion: tls.VersionTLS12} //nolint:gosec // opt-in flag, refused with a token
	if o.EPPCAFile != "" {
		var err error
		if tlsCfg.RootCAs, err = tlsfiles.CAPool("--epp-ca-file", o.EPPCAFile); err != nil {
			return nil, err
		}
	}
	var rt http.RoundTripper = &http.Transport{
		Proxy:               nil, // pod IPs: never through an HTTP proxy
		TLSClientConfig:     tlsCfg,
		DialContext:         (&net.Dialer{Timeout: o.ScrapeTimeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 2, IdleConnTimeout: 90 * time.Second, TLSHandshakeTimeout: o.ScrapeTimeout,
	}
	if o.EPPBearerTokenFile != "" {
		if o.EPPCAFile == "" || o.EPPInsecureTLS {
			return nil, errors.New("--epp-bearer-token-file needs --epp-ca-file and no --epp-insecure-skip-verify")
		}
		rt = &tokenFileRoundTripper{path: o.EPPBearerTokenFile, next: rt}
	}
	return &http.Client{Transport: rt, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, nil
}

// maxTokenBytes bounds the token file; a ServiceAccount JWT is ~1 KiB.
const maxTokenBytes = 64 << 10

// tokenFileRoundTripper adds "Authorization: Bearer <file content>" to https
// requests and refuses plain-HTTP ones outright.
type tokenFileRoundTripper struct {
	path string
	next http.RoundTripper
}

func (t *tokenFileRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" {
		return nil, fmt.Errorf("refusing to send the --epp-bearer-token-file token over plain HTTP to %s", req.URL.Redacted())
	}
	f, err := os.Open(t.path)
	if err != nil {
		return nil, fmt.Errorf("--epp-bearer-token-file: %w", err)
	}
	raw, err := io.ReadAll(io.LimitReader(f, maxTokenBytes+1))
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("--epp-bearer-token-file=%q: %w", t.path, err)
	}
	token := strings.TrimSpace(string(raw))
	if token == "" || len(raw) > maxTokenBytes {
		return nil, fmt.Errorf("--epp-bearer-token-file=%q: want a non-empty token of at most %d bytes", t.path, maxTokenBytes)
	}
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+token)
	return t.next.RoundTrip(req)
}

func serveActivator(ctx context.Context, o *Options, waker *Waker, metrics *Metrics) error {
	backends, err := ParseBackends(o.ActivatorBackends)
	if err != nil {
		return err
	}
	act := NewActivator(&Activator{Backends: backends, Waker: waker, Metrics: metrics, MaxWait: o.ActivatorMaxWait, HealthPath: o.ActivatorHealthPath,
		MaxBodyBytes: o.ActivatorMaxBodyBytes, MaxHeldBytes: o.ActivatorMaxHeldBytes, MaxHeldRequests: int64(o.ActivatorMaxHeldRequests),
		MaxHeldRequestsPerModel: int64(o.ActivatorMaxHeldRequestsPerModel), MaxHeldBytesPerModel: o.ActivatorMaxHeldBytesPerModel,
		MaxHeaderBytes: o.ActivatorMaxHeaderBytes, MaxConnections: o.ActivatorMaxConnections, Paths: o.ActivatorPaths,
		ReadTimeout: o.ActivatorReadTimeout, ResponseTimeout: o.ActivatorWriteTimeout, IdleTimeout: o.ActivatorIdleTimeout,
		BudgetRetryAfter: o.RetryAfter})
	ln, err := net.Listen("tcp", o.ActivatorListen)
	if err != nil {
		return fmt.Errorf("--activator-listen=%s: %w", o.ActivatorListen, err)
	}
	srv := act.Server()
	go func() { _ = srv.Serve(act.Listener(ln)) }()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	klog.InfoS("activator listening", "address", ln.Addr().String(), "models", slices.Sorted(maps.Keys(backends)), "paths", act.Paths, "maxWait", o.ActivatorMaxWait,
		"maxHeldRequests", act.MaxHeldRequests, "perModel", act.MaxHeldRequestsPerModel, "maxHeldBytes", act.MaxHeldBytes, "perModelBytes", act.MaxHeldBytesPerModel,
		"maxBodyBytes", act.MaxBodyBytes, "maxHeaderBytes", act.MaxHeaderBytes, "maxConnections", act.MaxConnections)
	return nil
}
