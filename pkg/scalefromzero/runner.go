package scalefromzero

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"

	"github.com/wva-project/wva/pkg/inferencepool"
)

// Endpoint is one EPP /metrics URL and the namespace whose groups it
// serves ("" = every namespace); with Pool, only the groups with a variant
// whose pods the pool selects.
type Endpoint struct {
	URL       string
	Namespace string
	Pool      *inferencepool.Pool
}

// Serves reports whether the endpoint's EPP serves the group.
func (ep Endpoint) Serves(g Group) bool {
	if ep.Namespace != "" && ep.Namespace != g.Key.Namespace {
		return false
	}
	if ep.Pool == nil {
		return true
	}
	for _, v := range g.Variants {
		if ep.Pool.Selects(g.Key.Namespace, v.PodLabels) {
			return true
		}
	}
	return false
}

// EndpointSource lists the EPP endpoints serving the given namespaces.
type EndpointSource interface {
	Endpoints(namespaces map[string]bool) []Endpoint
}

// StaticEndpoints are fixed URLs (--epp-url) serving every namespace.
type StaticEndpoints []string

// Endpoints implements EndpointSource.
func (s StaticEndpoints) Endpoints(map[string]bool) []Endpoint {
	out := make([]Endpoint, 0, len(s))
	for _, u := range s {
		out = append(out, Endpoint{URL: u})
	}
	return out
}

// PodEndpoints are the running EPP pods from an informer filtered by the
// EPP label selector. The EPP's queue metric has no namespace, so an EPP
// pod serves the groups of its own namespace.
type PodEndpoints struct {
	Pods   corelisters.PodLister
	Scheme string
	Port   int
	Path   string
}

// Endpoints implements EndpointSource.
func (p PodEndpoints) Endpoints(namespaces map[string]bool) []Endpoint {
	var out []Endpoint
	for ns := range namespaces {
		pods, err := p.Pods.Pods(ns).List(labels.Everything())
		if err != nil {
			continue
		}
		for _, pod := range pods {
			if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
				continue
			}
			u := fmt.Sprintf("%s://%s%s", p.Scheme, net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(p.Port)), p.Path)
			out = append(out, Endpoint{URL: u, Namespace: ns})
		}
	}
	return out
}

// PoolEndpoints are the endpoint pickers named by the InferencePools of the
// namespaces asked for, scraped through their Service (the EPP that serves
// it is the one routing: a standby replica is not Ready, so not behind it)
// on the metrics port, since spec.endpointPickerRef's port is the gateway's
// ext-proc port.
type PoolEndpoints struct {
	Pools  *inferencepool.Source
	Scheme string
	Port   int
	Path   string
}

// Endpoints implements EndpointSource.
func (p PoolEndpoints) Endpoints(namespaces map[string]bool) []Endpoint {
	var out []Endpoint
	for ns := range namespaces {
		for _, pool := range p.Pools.Pools(ns) {
			host := pool.EPP.Name + "." + pool.Namespace + ".svc"
			u := fmt.Sprintf("%s://%s%s", p.Scheme, net.JoinHostPort(host, strconv.Itoa(p.Port)), p.Path)
			out = append(out, Endpoint{URL: u, Namespace: ns, Pool: &pool})
		}
	}
	return out
}

// Runner is the poll loop: every Interval it finds the groups at zero,
// scrapes the EPPs that serve them (only then) and wakes groups with a
// non-zero queue as soon as a scrape shows it.
type Runner struct {
	State     StateSource
	Endpoints EndpointSource
	Scraper   *Scraper
	Waker     *Waker
	Metrics   *Metrics
	Interval  time.Duration
	// BudgetEvery is how often the per-pool budget gauges are refreshed
	// (0: never, no budget).
	BudgetEvery time.Duration

	mu         sync.Mutex
	lastErr    map[string]string
	lastBudget time.Time
}

// Run polls until ctx ends.
func (r *Runner) Run(ctx context.Context) {
	t := time.NewTicker(r.Interval)
	defer t.Stop()
	for {
		r.Tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Tick runs one poll round; scrapes it starts report asynchronously.
func (r *Runner) Tick(ctx context.Context) {
	snap, err := r.State.Snapshot(false, nil)
	if err != nil {
		klog.ErrorS(err, "reading groups")
		return
	}
	zero := snap.ZeroGroups()
	namespaces := map[string]bool{}
	for _, g := range zero {
		namespaces[g.Key.Namespace] = true
	}
	r.Waker.Sync(zero)
	r.Metrics.GroupsAtZero.Set(float64(len(zero)))
	r.refreshBudget()
	if len(zero) == 0 {
		return
	}
	eps := r.Endpoints.Endpoints(namespaces)
	r.forgetEndpoints(eps)
	for _, ep := range eps {
		var served []Group
		for _, g := range zero {
			if ep.Serves(g) {
				served = append(served, g)
			}
		}
		if len(served) == 0 {
			continue // a pool none of whose groups is at zero
		}
		r.Scraper.LaunchIn(ctx, ep.Namespace, ep.URL, func(res ScrapeResult) { r.handle(ctx, res, served) })
	}
}

func (r *Runner) handle(ctx context.Context, res ScrapeResult, groups []Group) {
	r.logTransition(res)
	if res.Err != nil {
		return
	}
	for _, g := range groups {
		if q := res.Queue.For(g.Key.ModelID); q > 0 {
			klog.V(2).InfoS("queued requests for a group at zero", "group", g.Key, "queue", q, "epp", res.URL)
			r.Waker.Wake(ctx, g.Key, res.At)
		}
	}
}

// logTransition logs an endpoint's errors when they start, change or stop,
// not on every 100 ms scrape (the metric counts each one).
func (r *Runner) logTransition(res ScrapeResult) {
	msg := ""
	if res.Err != nil {
		msg = res.Err.Error()
	}
	r.mu.Lock()
	if r.lastErr == nil {
		r.lastErr = map[string]string{}
	}
	prev, seen := r.lastErr[res.URL]
	r.lastErr[res.URL] = msg
	r.mu.Unlock()
	switch {
	case msg != "" && msg != prev:
		klog.ErrorS(res.Err, "EPP scrape failed", "url", res.URL)
	case msg == "" && seen && prev != "":
		klog.InfoS("EPP scrape recovered", "url", res.URL)
	}
}

// forgetEndpoints drops the error memory of endpoints that went away (EPP
// pods come and go with new IPs).
func (r *Runner) forgetEndpoints(eps []Endpoint) {
	keep := make(map[string]bool, len(eps))
	for _, ep := range eps {
		keep[ep.URL] = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for u := range r.lastErr {
		if !keep[u] {
			delete(r.lastErr, u)
		}
	}
}

func (r *Runner) refreshBudget() {
	if r.BudgetEvery <= 0 || time.Since(r.lastBudget) < r.BudgetEvery {
		return
	}
	r.lastBudget = time.Now()
	snap, err := r.State.Snapshot(true, nil)
	if err != nil {
		klog.ErrorS(err, "reading the GPU budget")
		return
	}
	r.Metrics.setBudget(snap.Usage)
}
