package fleet

import (
	"sort"
	"time"

	"github.com/wva-project/wva/pkg/sim/scenario"
)

// What a policy observes of the fleet: the clock, each variant's replicas
// and pods, the gateway, and what Prometheus would return for each pod.

// Now is the simulated time.
func (f *Fleet) Now() time.Duration { return f.now }

// Elapsed is the simulated time since the measured trace began, the
// timeline's clock: negative during the warm-up pre-roll.
func (f *Fleet) Elapsed() time.Duration { return f.now - f.origin }

// Scenario is the scenario the fleet plays.
func (f *Fleet) Scenario() *scenario.Scenario { return f.sc }

// SpecReplicas is variant v's Deployment spec.replicas.
func (f *Fleet) SpecReplicas(v int) int32 { return f.variants[v].specN }

// Pods counts variant v's non-terminating pods, pending and ready.
func (f *Fleet) Pods(v int) int { return len(f.variants[v].pods) }

// ArrivalsOver counts the trace's requests that arrived in (now-window, now].
func (f *Fleet) ArrivalsOver(window time.Duration) float64 {
	reqs := f.trace.Requests
	hi := sort.Search(len(reqs), func(i int) bool { return reqs[i].Arrival > f.now })
	lo := sort.Search(len(reqs), func(i int) bool { return reqs[i].Arrival > f.now-window })
	return float64(hi - lo)
}

// CompletionsOver counts the requests vLLM completed in (now-window, now].
func (f *Fleet) CompletionsOver(window time.Duration) float64 {
	return f.completions.over(f.now, window)
}

// Name is the pod's name.
func (p *Pod) Name() string { return p.name }

// Created is when the pod was created (negative for the initial fleet).
func (p *Pod) Created() time.Duration { return p.created }

// ReadyAt is when the pod turned (or turns) Ready.
func (p *Pod) ReadyAt() time.Duration { return p.readyAt }

// Server is the pod's model server spec.
func (p *Pod) Server() scenario.ServerSpec { return p.srv.spec }

// Running and Waiting are the requests in the server's batch and in its
// queue now.
func (p *Pod) Running() int { return len(p.srv.running) }
func (p *Pod) Waiting() int { return p.srv.numWaiting() }

// MaxOverTime is max_over_time over (now-window, now] of the pod's KV
// cache usage and queue length; ok is false while the pod reports nothing.
func (p *Pod) MaxOverTime(now, window time.Duration) (kv, waiting float64, ok bool) {
	return p.prom.maxOverTime(now, window)
}

// Latest is an instant query of the pod's KV cache usage and queue length.
func (p *Pod) Latest(now time.Duration) (kv, waiting float64, ok bool) {
	s, ok := p.prom.latest(now)
	return s.kv, s.waiting, ok
}

// TokenAverages are the 5m averages of prompt and output tokens.
func (p *Pod) TokenAverages(now time.Duration) (in, out float64, ok bool) {
	return p.prom.tokenAverages(now)
}

// Rates are the pod's arrival rate, mean TTFT and ITL and TPOT histogram
// over (now-window, now]; ok is false with fewer than two samples.
func (p *Pod) Rates(now, window time.Duration) (WindowRates, bool) {
	return p.prom.rates(now, window)
}

// SetControlStart sets when the control loop starts (default: once the
// first metrics window is full).
func (f *Fleet) SetControlStart(d time.Duration) { f.controlStart = d }

// SetProgress has Run report the measured time done and its end now and
// then.
func (f *Fleet) SetProgress(progress func(now, end time.Duration)) { f.progress = progress }

// MetCount counts the measured requests (after the warm-up) that finished
// within the SLO.
func (f *Fleet) MetCount() int {
	met := 0
	for k := f.skip; k < len(f.results); k++ {
		if f.Met(k) {
			met++
		}
	}
	return met
}

// TTFT is request i's time to first token in seconds; done is false when
// it was rejected or never finished.
func (f *Fleet) TTFT(i int) (seconds float64, done bool) {
	r := f.results[i]
	return float64(r.ttft), r.state == reqDone
}
