package scalefromzero

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

func eppPod(ns, name, ip string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Status: corev1.PodStatus{Phase: phase, PodIP: ip}}
}

func TestPodEndpoints(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	_ = idx.Add(eppPod("prod", "epp-0", "10.0.0.5", corev1.PodRunning))
	_ = idx.Add(eppPod("prod", "epp-1", "fd00::7", corev1.PodRunning))
	_ = idx.Add(eppPod("prod", "epp-pending", "", corev1.PodPending))
	gone := eppPod("prod", "epp-gone", "10.0.0.9", corev1.PodRunning)
	gone.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	_ = idx.Add(gone)
	_ = idx.Add(eppPod("dev", "epp-0", "10.0.1.5", corev1.PodRunning))
	src := PodEndpoints{Pods: corelisters.NewPodLister(idx), Scheme: "http", Port: 9090, Path: "/metrics"}

	eps := src.Endpoints(map[string]bool{"prod": true})
	sort.Slice(eps, func(i, j int) bool { return eps[i].URL < eps[j].URL })
	assert.Equal(t, []Endpoint{
		{URL: "http://10.0.0.5:9090/metrics", Namespace: "prod"},
		{URL: "http://[fd00::7]:9090/metrics", Namespace: "prod"},
	}, eps)
	assert.Empty(t, src.Endpoints(map[string]bool{}), "no group at zero: nothing to scrape")
	assert.Equal(t, []Endpoint{{URL: "u1"}, {URL: "u2"}}, StaticEndpoints{"u1", "u2"}.Endpoints(nil))
}

// namespacedEndpoints maps namespaces to fixed URLs, like selector mode.
type namespacedEndpoints map[string]string

func (n namespacedEndpoints) Endpoints(namespaces map[string]bool) []Endpoint {
	var out []Endpoint
	for ns := range namespaces {
		if u, ok := n[ns]; ok {
			out = append(out, Endpoint{URL: u, Namespace: ns})
		}
	}
	return out
}

func TestRunnerTick(t *testing.T) {
	c := newCluster()
	c.variant("prod", "l4", "llama", "5", 0, "", 1)
	c.variant("dev", "l4", "llama", "5", 0, "", 1) // same model, other namespace and EPP
	c.variant("prod", "mistral", "mistral", "5", 1, "", 1)
	f := newWakerFixture(c, false)
	prodEPP := &fakeEPP{body: `llm_d_epp_flow_control_queue_size{target_model_name="llama"} 3
llm_d_epp_flow_control_queue_size{target_model_name="mistral"} 3
`}
	devEPP := &fakeEPP{body: `llm_d_epp_flow_control_queue_size{target_model_name="llama"} 0` + "\n"}
	prodSrv, devSrv := httptest.NewServer(prodEPP), httptest.NewServer(devEPP)
	defer prodSrv.Close()
	defer devSrv.Close()
	called := make(chan Target, 10)
	f.scaler.onCall = func(t Target) { called <- t }
	r := &Runner{State: f.waker.State, Waker: f.waker, Metrics: f.waker.Metrics, Interval: 10 * time.Millisecond,
		Endpoints: namespacedEndpoints{"prod": prodSrv.URL, "dev": devSrv.URL},
		Scraper:   NewScraper(prodSrv.Client(), time.Second, 4, nil)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Run(ctx)

	select {
	case got := <-called:
		assert.Equal(t, "prod", got.Namespace, "dev's EPP reports no queue; mistral is not at zero")
	case <-time.After(5 * time.Second):
		t.Fatal("no scale call")
	}
	time.Sleep(100 * time.Millisecond) // ~10 more ticks, the informer still says 0
	assert.Len(t, f.scaler.names(), 1, "one scale call per wake-up")

	// Everything serving: no group at zero, so no scraping at all.
	c.setReplicas("prod", "l4", 1)
	c.setReplicas("dev", "l4", 1)
	time.Sleep(50 * time.Millisecond)
	before := prodEPP.requests.Load() + devEPP.requests.Load()
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, before, prodEPP.requests.Load()+devEPP.requests.Load())
	assert.Equal(t, 0.0, testutil.ToFloat64(r.Metrics.GroupsAtZero))
}

// listEndpoints are fixed endpoints, in order, of the namespaces asked for.
type listEndpoints []Endpoint

func (l listEndpoints) Endpoints(namespaces map[string]bool) []Endpoint {
	var out []Endpoint
	for _, ep := range l {
		if namespaces[ep.Namespace] {
			out = append(out, ep)
		}
	}
	return out
}

// TestSlowNamespaceDoesNotDelayOthers: namespaces full of EPPs that answer
// only at the scrape timeout do not hold up a wake in another namespace.
// One such namespace leaves a slot free for the others; with two, the
// quiet namespace gets the next freed slot, not the back of the line.
func TestSlowNamespaceDoesNotDelayOthers(t *testing.T) {
	const slots, slowPerNamespace, timeout = 4, 32, 500 * time.Millisecond
	for _, tc := range []struct {
		name   string
		noisy  []string
		within time.Duration
	}{
		{"one noisy namespace: a slot stays free", []string{"noisy"}, timeout * 4 / 5},
		{"two noisy namespaces: the next freed slot", []string{"noisy", "loud"}, 2 * timeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster()
			c.variant("quiet", "l4", "llama", "5", 0, "", 1)
			var eps listEndpoints
			var slow []*fakeEPP
			for _, ns := range tc.noisy {
				c.variant(ns, "l4", "llama", "5", 0, "", 1)
				for range slowPerNamespace {
					epp := &fakeEPP{delay: time.Hour} // answers only when the scrape gives up
					srv := httptest.NewServer(epp)
					t.Cleanup(srv.Close)
					slow = append(slow, epp)
					eps = append(eps, Endpoint{URL: srv.URL, Namespace: ns})
				}
			}
			quiet := &fakeEPP{body: `llm_d_epp_flow_control_queue_size{target_model_name="llama"} 0` + "\n"}
			quietSrv := httptest.NewServer(quiet)
			t.Cleanup(quietSrv.Close)
			// Last in every tick: the noisy scrapes ask for slots first.
			eps = append(eps, Endpoint{URL: quietSrv.URL, Namespace: "quiet"})

			f := newWakerFixture(c, false)
			woke := make(chan time.Time, 10)
			f.scaler.onCall = func(tg Target) {
				if tg.Namespace == "quiet" {
					woke <- time.Now()
				}
			}
			r := &Runner{State: f.waker.State, Waker: f.waker, Metrics: f.waker.Metrics, Interval: 10 * time.Millisecond,
				Endpoints: eps, Scraper: NewScraper(&http.Client{}, timeout, slots, nil)}
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel) // runs before the servers close: their handlers return
			go r.Run(ctx)

			slowInFlight := func() int {
				n := 0
				for _, e := range slow {
					n += int(e.inFlight.Load())
				}
				return n
			}
			require.Eventually(t, func() bool { return slowInFlight() >= slots-1 }, 5*time.Second, time.Millisecond)
			time.Sleep(50 * time.Millisecond) // every noisy scrape is waiting or running

			queued := time.Now()
			quiet.set(func(f *fakeEPP) { f.body = `llm_d_epp_flow_control_queue_size{target_model_name="llama"} 3` + "\n" })
			select {
			case at := <-woke:
				t.Logf("woken %s after its queue showed", at.Sub(queued).Round(time.Millisecond))
				assert.Less(t, at.Sub(queued), tc.within, "wake in the quiet namespace after its queue showed")
			case <-time.After(20 * time.Second):
				t.Fatal("the quiet namespace was never woken")
			}
			assert.LessOrEqual(t, slowInFlight(), slots, "--max-concurrent-scrapes still bounds the scrapes")
		})
	}
}
