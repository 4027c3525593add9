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
)

// Endpoint is one EPP /metrics URL and the namespace whose groups it
// serves ("" = every namespace).
type Endpoint struct {
	URL       string
	Namespace string
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
			if ep.Namespace == "" || ep.Namespace == g.Key.Namespace {
				served = append(served, g)
			}
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
