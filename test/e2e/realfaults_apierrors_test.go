//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/wva-project/wva/test/fleet"
	"github.com/wva-project/wva/test/testenv"
)

// The status-write fault: namespace apiNS, managed by its own `wva
// controller`; the rig's adapter reaches kube-apiserver through an
// apiFaultProxy that fails only this namespace's VA status writes, so the
// other scenarios sharing the adapter are not disturbed.
const (
	apiNS    = "rt-api"
	apiModel = "rt/api"
	// apiRetryAfter is the Retry-After of the 429s.
	apiRetryAfter = 5 * time.Second
)

func apiVariants() []fleet.Variant { return []fleet.Variant{variant(apiNS, "api", apiModel)} }

// apiScaleToZeroEntries keep rt/api out of scale to zero.
func apiScaleToZeroEntries() map[string]string {
	return map[string]string{"api": "model_id: " + apiModel + "\nenable_scale_to_zero: false\nretention_period: 10m"}
}

// Fault modes of an apiFaultProxy.
const (
	faultOff int32 = iota
	fault500
	fault429
)

// apiFaultProxy is a reverse proxy to kube-apiserver that, while switched
// on, answers PUT and PATCH of .../namespaces/<ns>/variantautoscalings/*/status
// with 500, or 429 and Retry-After, and records every such attempt. It
// authenticates upstream with the adapter's own client certificate; the
// adapter talks plain HTTP to it on loopback.
type apiFaultProxy struct {
	ns         string
	mode       atomic.Int32
	kubeconfig string

	mu       sync.Mutex
	attempts []time.Time
}

func (p *apiFaultProxy) start(t *testing.T, upstreamKubeconfig, dir string) {
	cfg, err := clientcmd.BuildConfigFromFlags("", upstreamKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport:     transport,
		FlushInterval: -1, // watches stream
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if p.statusWrite(req) {
			p.mu.Lock()
			p.attempts = append(p.attempts, time.Now())
			p.mu.Unlock()
			switch p.mode.Load() {
			case fault500:
				writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, "injected fault")
				return
			case fault429:
				w.Header().Set("Retry-After", fmt.Sprint(int(apiRetryAfter.Seconds())))
				writeStatus(w, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, "injected throttling")
				return
			}
		}
		rp.ServeHTTP(w, req)
	})}
	go srv.Serve(ln) //nolint:errcheck // ends with Close
	t.Cleanup(func() { srv.Close() })
	p.kubeconfig = filepath.Join(dir, "wva-adapter-via-fault-proxy.kubeconfig")
	if err := testenv.WriteKubeconfig(p.kubeconfig, &rest.Config{Host: "http://" + ln.Addr().String()}); err != nil {
		t.Fatal(err)
	}
}

func (p *apiFaultProxy) statusWrite(req *http.Request) bool {
	return (req.Method == http.MethodPut || req.Method == http.MethodPatch) &&
		strings.Contains(req.URL.Path, "/namespaces/"+p.ns+"/variantautoscalings/") && strings.HasSuffix(req.URL.Path, "/status")
}

// firstIn is the first status-write attempt at or after from (zero if none).
func (p *apiFaultProxy) firstIn(from time.Time) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, at := range p.attempts {
		if !at.Before(from) {
			return at
		}
	}
	return time.Time{}
}

// writesIn counts the status-write attempts in [from, to).
func (p *apiFaultProxy) writesIn(from, to time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, at := range p.attempts {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return n
}

// writeStatus answers with a metav1.Status, as kube-apiserver does, so the
// client sees the typed error (IsInternalError, IsTooManyRequests).
func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(metav1.Status{ //nolint:errcheck // best effort to the client
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg,
	})
}

// statusWritesFailing: rt/api runs at 2 replicas (KV 0.5), decided 2. Its
// VA status writes then fail for three engine intervals or more, first
// with 429 and Retry-After, then with 500, and meanwhile the load rises to KV 0.78
// (3 are needed): the decision to 3 is pending. The writes are retried
// with backoff (counted at the proxy), the served wva_desired_replicas
// stays the last written 2 and the Deployment does not move; once the
// fault is off, the pending 3 is written within two intervals and carried
// out.
func statusWritesFailing(ctx context.Context, t *testing.T, r *rig) {
	const ns, name = apiNS, "api"
	p := r.opts.APIFaults
	interval := r.opts.EngineInterval
	r.waitReady(ctx, t, ns, name, 2)
	steadyDecision(ctx, t, r, ns, name, apiModel, 2)
	d, err := r.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 2 {
		t.Fatalf("%s/%s: %d replicas before the fault, want 2", ns, name, *d.Spec.Replicas)
	}
	changes := watchReplicas(ctx, t, r, ns, name, d.ResourceVersion, 2)

	// 429s until the first throttled attempt and two Retry-Afters past it
	// (a throttled request holds the cycle for Retry-After per client
	// retry), then 500s for at least two more engine intervals.
	p.mode.Store(fault429)
	on := time.Now()
	r.fleet.SetLoad(ns, apiModel, 7.8) // 3.9 req/s per pod: KV 0.78
	var to500 time.Time
	for to500.IsZero() || time.Since(on) < 3*interval || time.Since(to500) < 2*interval {
		if to500.IsZero() {
			if first := p.firstIn(on); !first.IsZero() && time.Since(first) > 2*apiRetryAfter {
				p.mode.Store(fault500)
				to500 = time.Now()
			}
		}
		if v := served(ctx, r, ns, name); v != 2 {
			t.Fatalf("status writes failing %s: wva_desired_replicas %d, want the last written 2", time.Since(on).Round(time.Second), v)
		}
		if a := r.va(ctx, t, ns, name).Status.DesiredOptimizedAlloc; a.NumReplicas != 2 {
			t.Fatalf("status writes failing: VA status says %d (%s): a write got through", a.NumReplicas, a.Reason)
		}
		if got := changes(); len(got) != 0 {
			t.Fatalf("status writes failing: spec.replicas changes %v, want none", got)
		}
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
		time.Sleep(time.Second)
	}
	p.mode.Store(faultOff)
	off := time.Now()
	n429, n500 := p.writesIn(on, to500), p.writesIn(to500, off)
	// Not a hot loop: a 500 is retried 5 times per cycle (engine
	// StatusWriteBackoff, about 1.5 s), cycles come once per interval
	// (plus those triggered by other VAs' changes); a 429 is retried no
	// sooner than its Retry-After.
	if perInterval := float64(n500) / off.Sub(to500).Seconds() * interval.Seconds(); n500 == 0 || perInterval > 15 {
		t.Fatalf("500s for %s: %d status-write attempts (%.1f per engine interval); want retries, at most 15 per interval",
			off.Sub(to500).Round(time.Second), n500, perInterval)
	}
	// From the first throttled attempt: one per Retry-After, plus the
	// in-flight one and a new cycle's first.
	if first := p.firstIn(on); n429 == 0 || n429 > int(to500.Sub(first)/apiRetryAfter)+3 {
		t.Fatalf("429 (Retry-After %s) for %s after the first: %d status-write attempts, want 1..%d",
			apiRetryAfter, to500.Sub(first).Round(time.Second), n429, int(to500.Sub(first)/apiRetryAfter)+3)
	}

	// The pending decision is written within two intervals.
	var written time.Time
	testenv.Eventually(ctx, t, "the pending decision 3 written", func() (bool, string) {
		a := r.va(ctx, t, ns, name).Status.DesiredOptimizedAlloc
		if a.NumReplicas == 3 {
			written = time.Now()
			return true, ""
		}
		return false, fmt.Sprint(a)
	})
	if took := written.Sub(off); took > 2*interval+5*time.Second {
		t.Fatalf("the pending decision written %s after the fault ended, want within two engine intervals (%s)", took.Round(time.Second), 2*interval)
	}
	scaled := r.waitReplicas(ctx, t, ns, name, 3)
	increasesOnly(t, ns+"/"+name+" after the fault", changes())
	va := r.va(ctx, t, ns, name)
	r.report.add("real intervals (%s): VA status writes failing %s (429 Retry-After %s for %s: %d attempts; 500 for %s: %d attempts) with a scale-up pending; served and Deployment held at 2; decision 3 written %s and Deployment 2->3 %s after the fault ended (%s)",
		ns, off.Sub(on).Round(time.Second), apiRetryAfter, to500.Sub(on).Round(time.Second), n429, off.Sub(to500).Round(time.Second), n500,
		written.Sub(off).Round(time.Second), scaled.Sub(off).Round(time.Second), va.Status.DesiredOptimizedAlloc.Reason)
}
