package policies

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/collector"
	"github.com/wva-project/wva/pkg/controller"
	"github.com/wva-project/wva/pkg/decide"
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
	"github.com/wva-project/wva/pkg/inventory"
	"github.com/wva-project/wva/pkg/sim/fleet"
	"github.com/wva-project/wva/pkg/sim/scenario"
)

// Policy names.
const (
	PolicyWVA   = "wva"
	PolicyWVAV1 = "wva-v1"
	// PolicyWVAThroughput is upstream's newest: throughput and percentage
	// analyzers combined.
	PolicyWVAThroughput  = "wva-throughput"
	PolicyQueueThreshold = "queue-threshold"
	PolicyKPA            = "kpa"
	PolicyStaticPeak     = "static-peak"
	// PolicyStaticFrontier expands to one row per constant fleet on the
	// cheapest-mix frontier, named static:<n>x<variant>+...
	PolicyStaticFrontier = "static-frontier"
	PolicyOracle         = "oracle"
)

// AllPolicies is every policy, in report order.
var AllPolicies = []string{PolicyWVA, PolicyWVAV1, PolicyWVAThroughput, PolicyQueueThreshold, PolicyKPA, PolicyStaticPeak, PolicyStaticFrontier, PolicyOracle}

// ParsePolicies splits a comma-separated list and checks every name.
func ParsePolicies(list string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		known := false
		for _, p := range AllPolicies {
			known = known || p == name
		}
		if !known {
			return nil, fmt.Errorf("unknown policy %q: want a comma-separated list of %s", name, strings.Join(AllPolicies, ", "))
		}
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no policy given: want a comma-separated list of %s", strings.Join(AllPolicies, ", "))
	}
	return out, nil
}

// staleAfter is the controller's --stale-after default.
const staleAfter = 5 * time.Minute

// WVA is the project's own path, run unchanged: every engine interval
// it builds the variant group the way pkg/engine does (decide.BuildPlans
// over VAs, their scale targets and a collector.Result made from the
// simulated Prometheus), runs the decide.Pipeline, and records the decision of
// record with decide.NextStatus. The companion controller acts as
// pkg/controller's PlanDirectScale says; the HPA (tolerance 0, 30 s
// scale-down window, as `wva controller` configures it) follows
// wva_desired_replicas. The analyzer is whatever the ConfigMaps select.
type WVA struct {
	cfg  scenario.WVAResolver
	pipe decide.Pipeline
	vas  []*llmdv1alpha1.VariantAutoscaling
	// templates are the VAs' targets' pod templates, for the engine args.
	templates []corev1.PodSpec
	caps      controller.Capabilities
	analyzer  string
	// state is the analyzer's memory (GroupResult.State), handed back each
	// cycle as the engine does.
	state any
	// Errors counts cycles where a group's analyzer failed.
	Errors int
	// observe, when set, sees every cycle's results (tests, debugging).
	observe func(now time.Duration, res []decide.GroupResult)
}

func NewWVA(sc *scenario.Scenario) (*WVA, error) {
	cfg, err := sc.WVAResolver()
	if err != nil {
		return nil, err
	}
	p := &WVA{cfg: cfg, pipe: decide.Default(), caps: controller.Capabilities{Tolerance: true, ScaleToZero: true}}
	p.analyzer = cfg.Resolve(sc.ModelID, sc.Namespace).Analyzer()
	if _, ok := p.pipe.Analyzers[p.analyzer]; !ok {
		return nil, fmt.Errorf("policies.wva: the ConfigMaps select analyzer %q, which this build's pipeline does not have (have: %s)",
			p.analyzer, strings.Join(analyzerNames(p.pipe), ", "))
	}
	for _, v := range sc.Variants {
		va := &llmdv1alpha1.VariantAutoscaling{}
		va.Name, va.Namespace = v.Name, sc.Namespace
		va.Spec = llmdv1alpha1.VariantAutoscalingSpec{
			ScaleTargetRef:  llmdv1alpha1.CrossVersionObjectReference{Kind: llmdv1alpha1.ScaleTargetKindDeployment, Name: v.Name},
			ModelID:         sc.ModelID,
			MinReplicas:     ptr.To(v.MinReplicas),
			MaxReplicas:     v.MaxReplicas,
			VariantCost:     strconv.FormatFloat(v.Cost, 'f', -1, 64),
			AcceleratorName: v.Accelerator,
		}
		p.vas = append(p.vas, va)
		p.templates = append(p.templates, podTemplate(sc.ModelID, v.Server))
	}
	return p, nil
}

func analyzerNames(p decide.Pipeline) []string {
	var names []string
	for n := range p.Analyzers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (p *WVA) Start(*fleet.Fleet) {}

func (p *WVA) HPA(f *fleet.Fleet, v int) *fleet.HPA {
	spec := f.Scenario().Variants[v]
	return &fleet.HPA{Behavior: fleet.WVAControllerBehavior(), Min: spec.MinReplicas, Max: spec.MaxReplicas}
}

func (p *WVA) Engine(f *fleet.Fleet) {
	now := f.WallClock()
	views, metrics := p.collect(f)
	plans := decide.BuildPlans(views, metrics, nil, p.resolve)
	inputs := make([]decide.GroupInput, len(plans))
	for i, pl := range plans {
		pl.Input.State = p.state
		inputs[i] = pl.Input
	}
	results := p.pipe.Run(now, inputs)
	if p.observe != nil {
		p.observe(f.Elapsed(), results)
	}
	for i, pl := range plans {
		if results[i].Err != nil {
			p.Errors++
		}
		p.state = results[i].State
		for j, va := range pl.VAs {
			tgt := views[f.Scenario().VariantIndex(va.Name)].Target
			va.Status = decide.NextStatus(va, pl, results[i], results[i].Targets[j], tgt, nil, now)
		}
	}
	for i, va := range p.vas {
		if ds, ok := controller.PlanDirectScale(va, p.caps, f.SpecReplicas(i), now, staleAfter); ok {
			f.SetReplicas(i, ds.Replicas)
		}
	}
}

func (p *WVA) resolve(modelID, ns string) params.Resolved { return p.cfg.Resolve(modelID, ns) }

// collect is what the adapter hands decide.BuildPlans, nothing added
// afterwards: per VA the inventory's decide.Target (replicas, Ready pods
// with their Ready times, pending pods, the engine args read from the pod template with
// inventory.EngineArgs, the start-up delay measured with
// inventory.StartupDelay), and the collector.Result the collector's
// queries would return from the simulated Prometheus.
func (p *WVA) collect(f *fleet.Fleet) ([]decide.View, collector.Result) {
	window := f.Scenario().Control.MetricsWindow.D()
	model := collector.ModelKey{Namespace: f.Scenario().Namespace, Model: f.Scenario().ModelID}
	metrics := collector.Result{
		Pods:     map[collector.PodKey]collector.PodMetrics{},
		Requests: map[time.Duration]map[collector.ModelKey]float64{},
		// The EPP's flow-control queue and its request counter's rate.
		SchedulerQueues: map[collector.ModelKey]collector.EPPQueue{model: {Size: float64(f.Held())}},
		GatewayArrivals: map[collector.ModelKey]float64{model: f.ArrivalsOver(window) / window.Seconds()},
	}
	views := make([]decide.View, len(p.vas))
	for i, va := range p.vas {
		ready := f.ReadyPods(i)
		t := decide.Target{Resolved: true, SpecReplicas: f.SpecReplicas(i), PendingPods: f.PendingPods(i), StartupDelay: startupDelay(ready)}
		t.MaxNumSeqs, t.MaxNumBatchedTokens = inventory.EngineArgs(&p.templates[i])
		t.ReadyAt = make(map[string]time.Time, len(ready))
		for _, pod := range ready {
			t.ReadyPods = append(t.ReadyPods, pod.Name())
			t.ReadyAt[pod.Name()] = fleet.Epoch.Add(pod.ReadyAt())
			if pm, ok := podMetrics(pod, f.Now(), window); ok {
				metrics.Pods[collector.PodKey{Namespace: va.Namespace, Pod: pod.Name()}] = pm
			}
		}
		views[i] = decide.View{VA: va, Target: t}
	}
	// The request-count window the engine asks the collector for (every VA
	// here serves the one model).
	w := collector.IdleWindow(p.resolve(f.Scenario().ModelID, f.Scenario().Namespace).ScaleToZero.RetentionPeriod.D())
	metrics.Requests[w] = map[collector.ModelKey]float64{model: f.CompletionsOver(w)}
	return views, metrics
}

// podTemplate is the variant's Deployment pod template as far as the
// inventory reads it: the vLLM engine args.
func podTemplate(modelID string, s scenario.ServerSpec) corev1.PodSpec {
	args := []string{"serve", modelID}
	if s.MaxNumSeqs > 0 {
		args = append(args, "--max-num-seqs", strconv.Itoa(int(s.MaxNumSeqs)))
	}
	if s.MaxNumBatchedTokens > 0 {
		args = append(args, "--max-num-batched-tokens", strconv.Itoa(int(s.MaxNumBatchedTokens)))
	}
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "vllm", Command: []string{"vllm"}, Args: args}}}
}

// startupDelay is the inventory's measurement over the variant's Ready
// pods: the median from creation to the Ready transition, 0 with none.
func startupDelay[P interface {
	Name() string
	Created() time.Duration
	ReadyAt() time.Duration
}](ready []P) time.Duration {
	pods := make([]*corev1.Pod, len(ready))
	for i, p := range ready {
		pods[i] = &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name(), CreationTimestamp: metav1.NewTime(fleet.Epoch.Add(p.Created()))},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
				Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(fleet.Epoch.Add(p.ReadyAt())),
			}}},
		}
	}
	return inventory.StartupDelay(pods)
}

// podMetrics is what the collector returns for a pod: max_over_time of KV
// usage and queue length over the window, the KV geometry
// (vllm:cache_config_info), the 5m token averages, and over the window the
// arrival rate and the mean TTFT and ITL (zero without two samples).
func podMetrics(p *fleet.Pod, now, window time.Duration) (collector.PodMetrics, bool) {
	kv, waiting, ok := p.MaxOverTime(now, window)
	if !ok {
		return collector.PodMetrics{}, false
	}
	pm := collector.PodMetrics{
		KvCacheUsage: kv, HasKvCacheUsage: true, QueueLength: waiting, HasQueueLength: true,
		NumGPUBlocks: int64(p.Server().NumGPUBlocks), BlockSize: int64(p.Server().BlockSize),
	}
	if in, out, ok := p.TokenAverages(now); ok {
		pm.AvgInputTokens, pm.AvgOutputTokens = in, out
	}
	if w, ok := p.Rates(now, window); ok {
		pm.ArrivalRate, pm.AvgTTFTms, pm.AvgITLms = w.ArrivalRate, w.TTFT*1000, w.ITL*1000
		if w.TPOT != nil {
			pm.TPOT = decision.Histogram{Bounds: fleet.TPOTBounds[:], Counts: w.TPOT}
		}
		if w.Queue != nil {
			pm.QueueTime = decision.Histogram{Bounds: fleet.QueueBounds[:], Counts: w.Queue}
		}
		if w.TTFTBuckets != nil {
			pm.TTFT = decision.Histogram{Bounds: fleet.TTFTBounds[:], Counts: w.TTFTBuckets}
		}
	}
	return pm, true
}

func (p *WVA) Metric(_ *fleet.Fleet, v int) (float64, float64, bool) {
	alloc := p.vas[v].Status.DesiredOptimizedAlloc
	if alloc.LastRunTime.IsZero() {
		return 0, 0, false // 503 from the adapter: the HPA holds
	}
	return float64(alloc.NumReplicas), 1, true
}

// scaleFromZero is `wva scale-from-zero`: the cheapest variant that may
// have a replica goes to one.
func (p *WVA) ScaleFromZero(f *fleet.Fleet) {
	if v := cheapestVariant(f.Scenario()); v >= 0 {
		f.SetReplicas(v, 1)
	}
}

func cheapestVariant(sc *scenario.Scenario) int {
	best := -1
	for i, v := range sc.Variants {
		if v.MaxReplicas < 1 {
			continue
		}
		if best < 0 || decision.Cheaper(v.Cost, v.Name, sc.Variants[best].Cost, sc.Variants[best].Name) {
			best = i
		}
	}
	return best
}

// v1Policy is the reference: the percentage-based saturation analyzer
// exactly as upstream describes it
// (docs/design.md#percentage-based-saturation), written here from that
// description rather than taken from pkg/analyzer, so the benchmark
// compares wva with the algorithm it started from:
//   - model-level transition blocking (desired != 0 and != current, or
//     replicas reporting != current) preserves desired / current;
//   - otherwise spare KV and queue averaged over non-saturated replicas;
//     scale up the cheapest variant without pending pods to ready+1, or,
//     when removing one of N non-saturated replicas keeps both spares at
//     or above the triggers, the most expensive variant with more than one
//     replica to ready-1; clamp to [min, max].
//
// Its decision reaches the same HPA as wva's (tolerance 0, 30 s window),
// so the two differ only in how they decide.
type v1Policy struct {
	cfg     scenario.V1Config
	desired []int32
	decided bool
}

func (p *v1Policy) Start(f *fleet.Fleet) { p.desired = make([]int32, len(f.Scenario().Variants)) }

func (p *v1Policy) HPA(f *fleet.Fleet, v int) *fleet.HPA {
	spec := f.Scenario().Variants[v]
	return &fleet.HPA{Behavior: fleet.WVAControllerBehavior(), Min: spec.MinReplicas, Max: spec.MaxReplicas}
}

func (p *v1Policy) Metric(_ *fleet.Fleet, v int) (float64, float64, bool) {
	return float64(p.desired[v]), 1, p.decided
}

func (p *v1Policy) ScaleFromZero(f *fleet.Fleet) {
	if v := cheapestVariant(f.Scenario()); v >= 0 {
		f.SetReplicas(v, 1)
	}
}

func (p *v1Policy) Engine(f *fleet.Fleet) {
	v1Decide(p.cfg, f.Scenario().Variants, observeV1(f), p.desired)
	p.decided = true
}

// v1Observation is what the percentage analyzer reads in one cycle, per
// variant: spec.replicas, replicas reporting metrics, pending pods, and
// the max_over_time KV usage and queue length of every reporting replica.
type v1Observation struct {
	current, reporting, pending []int32
	replicas                    []v1Replica
}

type v1Replica struct{ kv, queue float64 }

func observeV1(f *fleet.Fleet) v1Observation {
	n := len(f.Scenario().Variants)
	o := v1Observation{current: make([]int32, n), reporting: make([]int32, n), pending: make([]int32, n)}
	window := f.Scenario().Control.MetricsWindow.D()
	for i := range n {
		o.current[i] = f.SpecReplicas(i)
		o.pending[i] = f.PendingPods(i)
		for _, pod := range f.ReadyPods(i) {
			if kv, q, ok := pod.MaxOverTime(f.Now(), window); ok {
				o.reporting[i]++
				o.replicas = append(o.replicas, v1Replica{kv, q})
			}
		}
	}
	return o
}

// v1Decide is one cycle of the percentage analyzer. desired is the
// decision of record of the previous cycle (0 before any), updated in
// place.
func v1Decide(c scenario.V1Config, variants []scenario.VariantSpec, o v1Observation, desired []int32) {
	n := len(variants)
	current, reporting, pending := o.current, o.reporting, o.pending
	// Model-level transition blocking.
	transition := false
	for i := range n {
		if (desired[i] != 0 && desired[i] != current[i]) || reporting[i] != current[i] {
			transition = true
		}
	}
	if transition {
		for i := range n {
			if !(desired[i] != 0 && desired[i] != current[i]) {
				desired[i] = current[i]
			}
		}
		return
	}
	var nonSat int
	var spareKv, spareQueue float64
	for _, r := range o.replicas {
		if r.kv < c.KvCacheThreshold && r.queue < c.QueueLengthThreshold {
			nonSat++
			spareKv += c.KvCacheThreshold - r.kv
			spareQueue += c.QueueLengthThreshold - r.queue
		}
	}
	var avgKv, avgQueue float64
	if nonSat > 0 {
		avgKv, avgQueue = spareKv/float64(nonSat), spareQueue/float64(nonSat)
	}
	const eps = 1e-9
	scaleUp := avgKv < c.KvSpareTrigger-eps || avgQueue < c.QueueSpareTrigger-eps
	scaleDown := false
	if !scaleUp && nonSat >= 2 {
		factor := float64(nonSat) / float64(nonSat-1)
		remKv := c.KvCacheThreshold - (c.KvCacheThreshold-avgKv)*factor
		remQueue := c.QueueLengthThreshold - (c.QueueLengthThreshold-avgQueue)*factor
		scaleDown = remKv >= c.KvSpareTrigger-eps && remQueue >= c.QueueSpareTrigger-eps
	}
	target := append([]int32(nil), reporting...)
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	byCost := func(asc bool) {
		sort.SliceStable(order, func(a, b int) bool {
			va, vb := variants[order[a]], variants[order[b]]
			if va.Cost != vb.Cost {
				return (va.Cost < vb.Cost) == asc
			}
			return (va.Name < vb.Name) == asc
		})
	}
	switch {
	case scaleUp:
		byCost(true)
		for _, i := range order {
			if pending[i] == 0 {
				target[i] = reporting[i] + 1
				break
			}
		}
	case scaleDown:
		byCost(false)
		for _, i := range order {
			if target[i] > 1 {
				target[i] = reporting[i] - 1
				break
			}
		}
	}
	for i := range n {
		v := variants[i]
		desired[i] = min(max(target[i], v.MinReplicas), v.MaxReplicas)
	}
}

// queuePolicy is KEDA-style scaling of each variant on its own pods'
// vllm:num_requests_waiting (an instant sum query): the HPA keeps
// waiting / replicas at the target, with the stock behavior (tolerance
// 0.1, 300 s scale-down window, up by max(4 pods, 100%) per 15 s). A
// variant at zero has no pods, so no queue to see: it stays there (the
// KEDA operator activates on the same metric).
type queuePolicy struct {
	target float64
}

func (p *queuePolicy) Start(*fleet.Fleet)  {}
func (p *queuePolicy) Engine(*fleet.Fleet) {}

func (p *queuePolicy) HPA(f *fleet.Fleet, v int) *fleet.HPA {
	spec := f.Scenario().Variants[v]
	return &fleet.HPA{Behavior: fleet.DefaultHPABehavior(), Min: max(1, spec.MinReplicas), Max: spec.MaxReplicas}
}

func (p *queuePolicy) Metric(f *fleet.Fleet, v int) (float64, float64, bool) {
	var sum float64
	for _, pod := range f.ReadyPods(v) {
		if _, waiting, ok := pod.Latest(f.Now()); ok {
			sum += waiting
		}
	}
	return sum, p.target, true
}

func (p *queuePolicy) ScaleFromZero(*fleet.Fleet) {}

// Static keeps the replicas it starts with.
type Static struct{}

func (Static) Start(*fleet.Fleet)                                {}
func (Static) Engine(*fleet.Fleet)                               {}
func (Static) HPA(*fleet.Fleet, int) *fleet.HPA                  { return nil }
func (Static) Metric(*fleet.Fleet, int) (float64, float64, bool) { return 0, 0, false }
func (Static) ScaleFromZero(*fleet.Fleet)                        {}

// Analyzer is the analyzer wva's ConfigMaps select.
func (p *WVA) Analyzer() string { return p.analyzer }

// Observe has fn see every engine cycle's results, at the simulated time
// of the cycle (wva simulate --explain).
func (p *WVA) Observe(fn func(now time.Duration, res []decide.GroupResult)) { p.observe = fn }

// NewV1 is wva-v1, the reference percentage analyzer.
func NewV1(cfg scenario.V1Config) fleet.Policy { return &v1Policy{cfg: cfg} }

// NewThroughput is wva-throughput: the throughput analyzer beside wva-v1's.
func NewThroughput(cfg scenario.V1Config) fleet.Policy {
	return &throughputPolicy{v1Policy: v1Policy{cfg: cfg}}
}

// NewQueueThreshold is the KEDA-style policy on the variant's queue.
func NewQueueThreshold(target float64) fleet.Policy { return &queuePolicy{target: target} }

// NewKPA is Knative's KPA.
func NewKPA(sc *scenario.Scenario) fleet.Policy { return newKPAPolicy(sc) }
