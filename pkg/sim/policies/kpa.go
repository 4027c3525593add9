package policies

import (
	"math"
	"time"

	"github.com/wva-project/wva/pkg/sim/fleet"
	"github.com/wva-project/wva/pkg/sim/scenario"
)

// Knative Pod Autoscaler (KPA) defaults, as Knative documents them
// (config-autoscaler): stable window 60 s, panic window 10% of it,
// panic threshold 200%, max scale-up rate 1000, max scale-down rate 2,
// a decision every 2 s, scale-to-zero grace period 30 s.
const (
	kpaStableWindow     = 60 * time.Second
	kpaPanicWindow      = 6 * time.Second
	kpaPanicThreshold   = 2.0
	kpaMaxScaleUpRate   = 1000.0
	kpaMaxScaleDownRate = 2.0
	kpaTick             = 2 * time.Second
	kpaScrape           = time.Second
	kpaZeroGrace        = 30 * time.Second
)

// kpaParams are one variant's autoscaler settings: target is the
// per-pod concurrency the KPA sizes for (target concurrency x target
// utilization); min and max are min-scale and max-scale.
type kpaParams struct {
	target   float64
	min, max int32
}

// kpaState is what the KPA remembers between decisions.
type kpaState struct {
	// panicAt is the last decision that was over the panic threshold
	// (Knative's panicTime); < 0 when not in panic.
	panicAt      time.Duration
	maxPanicPods int32
	// zeroSince is when the desired count first became 0 (scale-to-zero
	// grace); < 0 when it is not 0.
	zeroSince time.Duration
}

func newKPAState() kpaState { return kpaState{panicAt: -1, zeroSince: -1} }

// kpaDecide is one KPA decision at now (pkg/autoscaler/scaling's Scale,
// then the KPA reconciler's min/max-scale and scale-to-zero grace):
// stable and panic are the variant's observed concurrency (requests in
// flight, summed over its pods) averaged over the stable and panic
// windows; ready counts its Ready pods and current its spec.replicas. It
// returns the replicas to set.
func kpaDecide(p kpaParams, st *kpaState, now time.Duration, stable, panicC float64, ready, current int32) int32 {
	readyF := math.Max(1, float64(ready))
	maxUp := math.Ceil(kpaMaxScaleUpRate * readyF)
	maxDown := math.Floor(readyF / kpaMaxScaleDownRate)
	dspc := math.Ceil(stable/p.target - 1e-9)
	dppc := math.Ceil(panicC/p.target - 1e-9)
	desiredStable := int32(math.Min(math.Max(dspc, maxDown), maxUp))
	desiredPanic := int32(math.Min(math.Max(dppc, maxDown), maxUp))
	over := dppc/readyF >= kpaPanicThreshold
	switch {
	case over:
		// Begin or extend the panic.
		st.panicAt = now
	case st.panicAt >= 0 && now-st.panicAt > kpaStableWindow:
		// The surge has made its way into the stable window.
		st.panicAt, st.maxPanicPods = -1, 0
	}
	desired := desiredStable
	if st.panicAt >= 0 {
		// In panic: the larger of the two, and never a decrease.
		desired = max(desired, desiredPanic)
		st.maxPanicPods = max(st.maxPanicPods, desired)
		desired = st.maxPanicPods
	}
	desired = min(max(desired, p.min), p.max)
	if desired > 0 {
		st.zeroSince = -1
		return desired
	}
	// To zero only after the grace period (the activator is put in the
	// path first); until then the replicas stay.
	if st.zeroSince < 0 {
		st.zeroSince = now
	}
	if now-st.zeroSince < kpaZeroGrace {
		return current
	}
	return 0
}

// kpaPolicy is Knative's KPA on each variant independently (Knative has
// no notion of a variant mix): it samples each variant's concurrency every
// second and sets spec.replicas directly every 2 s, with no HPA. The
// concurrency of a variant is what its pods hold (running and waiting in
// the server, as the queue-proxy counts) plus its share, in proportion to
// its pods, of the requests held at the gateway by flow control (the
// activator's buffer, which Knative counts while it is in the path). A
// variant at zero has no pods, so no share: it stays there while another
// variant serves (its activator never sees a request, as with
// queue-threshold); when the whole model is at zero, the activator path
// (the fast path) wakes the cheapest variant to the count the buffered
// requests ask for.
type kpaPolicy struct {
	cfg     scenario.KPAConfig
	params  []kpaParams
	states  []kpaState
	samples [][]kpaSample
	ticks   int
}

type kpaSample struct {
	at time.Duration
	c  float64
}

func newKPAPolicy(sc *scenario.Scenario) *kpaPolicy {
	p := &kpaPolicy{cfg: sc.Policies.KPA}
	for _, v := range sc.Variants {
		p.params = append(p.params, kpaParams{target: perPodTarget(p.cfg, v), min: v.MinReplicas, max: v.MaxReplicas})
		p.states = append(p.states, newKPAState())
	}
	p.samples = make([][]kpaSample, len(sc.Variants))
	return p
}

// perPodTarget is the concurrency one pod is sized for: the target
// (default: half the server's --max-num-seqs) times the utilization.
func perPodTarget(c scenario.KPAConfig, v scenario.VariantSpec) float64 {
	t := c.TargetConcurrency
	if t == 0 {
		t = float64(v.Server.MaxNumSeqs) / 2
	}
	return t * c.TargetUtilization
}

func (p *kpaPolicy) Start(*fleet.Fleet)                                {}
func (p *kpaPolicy) HPA(*fleet.Fleet, int) *fleet.HPA                  { return nil }
func (p *kpaPolicy) Metric(*fleet.Fleet, int) (float64, float64, bool) { return 0, 0, false }

// EnginePeriod makes the fleet call Engine every second (the KPA's
// metric scrape) instead of every control.engineInterval.
func (p *kpaPolicy) EnginePeriod() time.Duration { return kpaScrape }

func (p *kpaPolicy) Engine(f *fleet.Fleet) {
	var pods int
	nv := len(f.Scenario().Variants)
	for v := range nv {
		pods += f.Pods(v)
	}
	for v := range nv {
		var c float64
		for _, pod := range f.ReadyPods(v) {
			c += float64(pod.Running() + pod.Waiting())
		}
		if pods > 0 {
			c += float64(f.Held()) * float64(f.Pods(v)) / float64(pods)
		}
		s := append(p.samples[v], kpaSample{at: f.Now(), c: c})
		for len(s) > 0 && f.Now()-s[0].at >= kpaStableWindow {
			s = s[1:]
		}
		p.samples[v] = s
	}
	p.ticks++
	if p.ticks%int(kpaTick/kpaScrape) != 0 {
		return
	}
	for v := range nv {
		stable, panicC := windowMean(p.samples[v], f.Now(), kpaStableWindow), windowMean(p.samples[v], f.Now(), kpaPanicWindow)
		ready := int32(len(f.ReadyPods(v)))
		f.SetReplicas(v, kpaDecide(p.params[v], &p.states[v], f.Now(), stable, panicC, ready, f.SpecReplicas(v)))
	}
}

// windowMean averages the samples in (now-window, now].
func windowMean(s []kpaSample, now, window time.Duration) float64 {
	var sum float64
	n := 0
	for i := len(s) - 1; i >= 0 && now-s[i].at < window; i-- {
		sum += s[i].c
		n++
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// scaleFromZero is the activator: it buffers the model's requests and
// has the cheapest variant scaled to what they ask for (at least one).
func (p *kpaPolicy) ScaleFromZero(f *fleet.Fleet) {
	v := cheapestVariant(f.Scenario())
	if v < 0 {
		return
	}
	n := int32(math.Ceil(float64(f.Held()) / p.params[v].target))
	f.SetReplicas(v, min(max(n, 1), p.params[v].max))
}
