// Package engine runs the decision loop of the adapter: every interval (and
// on VA or ConfigMap changes) it collects metrics, runs the pipeline for every
// variant group and publishes the decisions of record in VA status.
package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/wva-project/wva/pkg/analyzer"
	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/budget"
	"github.com/wva-project/wva/pkg/collector"
	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/decide"
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
	"github.com/wva-project/wva/pkg/inferencepool"
)

// ViewSource lists VAs with their resolved targets (from informer caches).
type ViewSource interface {
	Views() ([]decide.View, error)
}

// MetricsSource collects the cycle's metrics (Prometheus).
type MetricsSource interface {
	Collect(ctx context.Context, req collector.Request) (collector.Result, error)
}

// StatusWriter persists a VA's status; it retries conflicts by re-reading
// the VA and re-applying the status it was given.
type StatusWriter interface {
	WriteStatus(ctx context.Context, va *llmdv1alpha1.VariantAutoscaling, status llmdv1alpha1.VariantAutoscalingStatus) error
}

// PoolResolver matches a variant's pod labels against the InferencePools of
// its namespace; ok is false when InferencePool discovery is off.
type PoolResolver interface {
	Resolve(namespace string, podLabels map[string]string) (res inferencepool.Resolution, ok bool)
}

// Engine is the decision loop. Only the leader runs it; every adapter
// replica serves what it publishes in VA status.
type Engine struct {
	Views    ViewSource
	Metrics  MetricsSource
	Status   StatusWriter
	Config   *config.Store
	Pipeline decide.Pipeline
	// Budget, when set, is read each cycle: limited groups share its free
	// GPUs per accelerator in the pipeline, then every scale-up is admitted
	// against its pool's GPUs and GPU memory (the views' own replicas
	// counted as held) and each variant's GPUBudgeted condition written;
	// nil leaves every group unlimited.
	Budget budget.LimiterSource
	// Unbudgeted is what admission does with a variant no pool fully
	// covers ("" = budget.UnbudgetedUnlimited).
	Unbudgeted budget.Unbudgeted
	Recorder   record.EventRecorder
	Observe    *Metrics
	Clock      clock.PassiveClock
	// Interval between cycles.
	Interval time.Duration
	// CycleTimeout bounds one cycle.
	CycleTimeout time.Duration
	// StatusHeartbeat rewrites an unchanged status this often so
	// lastRunTime shows the decision is still being made.
	StatusHeartbeat time.Duration
	// SaveState, when set, is given the analyzers' state after each
	// cycle's decisions and before any of their statuses is written: a
	// leader killed mid-publish leaves the state its published decisions
	// came from, so its successor decides as it would have. A failure is
	// logged and the statuses are written anyway.
	SaveState func(ctx context.Context, state map[decide.GroupKey]any) error
	// DeletionCosts and Running, when both set, annotate the Ready pods of
	// a Deployment the cycle scales down with their running requests
	// (controller.kubernetes.io/pod-deletion-cost) before the decision is
	// published, so its ReplicaSet deletes the idle ones first.
	DeletionCosts PodCostWriter
	Running       RunningSource
	// Pools, when set, finds the InferencePool that selects each variant's
	// pods; its InferencePoolResolved condition is written with the status.
	Pools PoolResolver
	// trigger is made once: informer handlers call Trigger from their own
	// goroutines while Run reads it.
	triggerOnce sync.Once
	trigger     chan struct{}
	lastSuccess atomic.Int64 // unix nanos
	// lastCycle is when the last cycle ended, whatever its outcome; runSince
	// is when the running Run started (0: not running). Liveness reads them.
	lastCycle atomic.Int64
	runSince  atomic.Int64
	// state is each group's analyzer memory (k2 history, tuner), passed
	// back every cycle. The adapter persists it (AnalyzerState) and a new
	// leader restores it (RestoreAnalyzerState) so it does not start cold.
	stateMu sync.Mutex
	state   map[decide.GroupKey]any
}

// AnalyzerState is a copy of each group's analyzer memory after the last
// cycle. The values are shared: analyzers never mutate a state they were
// given, so they are safe to read (marshal) from another goroutine.
func (e *Engine) AnalyzerState() map[decide.GroupKey]any {
	e.stateMu.Lock()
	defer e.stateMu.Unlock()
	out := make(map[decide.GroupKey]any, len(e.state))
	for k, v := range e.state {
		out[k] = v
	}
	return out
}

// RestoreAnalyzerState replaces the analyzers' memory, before the first
// cycle of a new leader. Values may be JSON (analyzer.DecodeState reads it).
func (e *Engine) RestoreAnalyzerState(state map[decide.GroupKey]any) {
	e.stateMu.Lock()
	defer e.stateMu.Unlock()
	e.state = state
}

// Cycle reports one engine cycle.
type Cycle struct {
	Groups        int
	Variants      int
	Queries       int
	StatusWrites  int
	MetricsErr    error
	Duration      time.Duration
	Results       []decide.GroupResult
	WriteFailures int
	// CostPatches counts the pods whose deletion cost was patched.
	CostPatches int
	// Budget is what the limited groups shared (nil: none read).
	Budget decision.Free
	// Admitted is each resolved variant's standing with the GPU budget,
	// by "namespace/name" (nil: no budget read).
	Admitted map[string]Admitted
}

// Trigger asks for a cycle as soon as possible (VA or ConfigMap change). It
// never blocks; triggers during a cycle coalesce into one.
func (e *Engine) Trigger() {
	select {
	case e.triggerChan() <- struct{}{}:
	default:
	}
}

func (e *Engine) triggerChan() chan struct{} {
	e.triggerOnce.Do(func() { e.trigger = make(chan struct{}, 1) })
	return e.trigger
}

// Run runs cycles every Interval and on triggers until ctx is done.
func (e *Engine) Run(ctx context.Context) {
	e.runSince.Store(e.Clock.Now().UnixNano())
	defer e.runSince.Store(0)
	ticker := time.NewTicker(e.Interval)
	defer ticker.Stop()
	// A deposed leader stops deciding: its per-variant gauges go too, so
	// Prometheus (and prometheus-adapter rules on wva_desired_replicas)
	// see only the current leader's decisions, not a frozen second series.
	defer e.Observe.Publish(nil, nil)
	defer e.Observe.PublishUnbudgeted(nil)
	defer func() {
		if e.Observe != nil {
			e.Observe.SharedTargetVariants.Set(0)
		}
	}()
	// Informers call Trigger on a replica that is not leading too (its
	// initial list, the leader's writes): the first cycle answers those
	// triggers, so a new leader does not run a second cycle right after.
	select {
	case <-e.triggerChan():
	default:
	}
	for {
		if _, err := e.RunOnce(ctx); err != nil && ctx.Err() == nil {
			klog.ErrorS(err, "engine cycle failed")
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-e.triggerChan():
			// Let a burst of changes (kubectl apply of several VAs) settle.
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}

// LastSuccess is when the last cycle collected metrics and published every
// decision (zero before the first).
func (e *Engine) LastSuccess() time.Time {
	n := e.lastSuccess.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// Live fails when Run is running and no cycle has ended within bound (the
// first counted from Run's start): the loop is stuck, and only a restart
// frees the Lease for another replica. A cycle that ends in error still
// counts: restarting does not fix Prometheus. Not running (not the leader)
// is live.
func (e *Engine) Live(bound time.Duration) error {
	since := e.runSince.Load()
	if since == 0 {
		return nil
	}
	last := e.lastCycle.Load()
	now := e.Clock.Now()
	if last < since {
		if age := now.Sub(time.Unix(0, since)); age > bound {
			return fmt.Errorf("engine: no cycle completed in the %s since it started, bound %s", age.Round(time.Second), bound)
		}
		return nil
	}
	if age := now.Sub(time.Unix(0, last)); age > bound {
		return fmt.Errorf("engine: last cycle %s ago, bound %s", age.Round(time.Second), bound)
	}
	return nil
}

// RunOnce runs one cycle: collect, decide every group, publish.
func (e *Engine) RunOnce(ctx context.Context) (Cycle, error) {
	start := e.Clock.Now()
	defer func() { e.lastCycle.Store(e.Clock.Now().UnixNano()) }()
	var c Cycle
	if e.CycleTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.CycleTimeout)
		defer cancel()
	}
	views, err := e.Views.Views()
	if err != nil {
		return c, err
	}
	views, held := holdSharedTargets(views)
	if e.Observe != nil {
		e.Observe.SharedTargetVariants.Set(float64(held))
	}
	resolve := func(modelID, ns string) params.Resolved { return e.Config.Resolve(modelID, ns) }

	result := e.collect(ctx, &c, views, resolve, start)
	plans, now := e.decide(&c, views, result, resolve)
	if e.SaveState != nil {
		if err := e.SaveState(ctx, e.AnalyzerState()); err != nil {
			klog.ErrorS(err, "saving the analyzers' state; a new leader would start from an older one")
		}
	}
	e.setDeletionCosts(ctx, &c, views, plans, now)
	samples, groups := e.publishGroups(ctx, &c, views, plans, now)
	e.publishUnresolved(ctx, &c, views, now)
	return e.finishCycle(c, samples, groups, start)
}

// collect queries the metrics for every view's namespace. A failure is kept
// in c.MetricsErr rather than returned: the cycle still runs so groups hold
// their previous decisions and statuses say why.
func (e *Engine) collect(ctx context.Context, c *Cycle, views []decide.View, resolve decide.ConfigResolver, start time.Time) collector.Result {
	req := collector.Request{Namespaces: namespacesOf(views), RetentionWindows: Windows(views, resolve), Time: start}
	var result collector.Result
	if len(views) > 0 {
		result, c.MetricsErr = e.Metrics.Collect(ctx, req)
		c.Queries = result.Queries
		e.observeCollection(result, c.MetricsErr)
		logDropped(result.DroppedSamples, views)
	}
	if c.MetricsErr != nil {
		klog.ErrorS(c.MetricsErr, "collecting metrics failed; previous decisions are held")
	}
	return result
}

// decide plans every group, runs the pipeline with the analyzers' state from
// the previous cycle, and keeps the new state for the next one. It returns
// the plans (in c.Results order) and the decision time used for statuses.
func (e *Engine) decide(c *Cycle, views []decide.View, result collector.Result, resolve decide.ConfigResolver) ([]decide.Plan, time.Time) {
	plans := decide.BuildPlans(views, result, c.MetricsErr, resolve)
	inputs := make([]decide.GroupInput, len(plans))
	prevState := e.AnalyzerState()
	for i, p := range plans {
		inputs[i] = p.Input
		inputs[i].State = prevState[p.Key]
	}
	pipe := e.Pipeline
	read, budgeted := e.readBudget(views)
	if budgeted && read.usage != nil && anyLimited(plans) {
		b := budget.FreeGPUs(read.usage)
		pipe.Budget, c.Budget = b, b
	}
	now := e.Clock.Now()
	c.Results = pipe.Run(now, inputs)
	if budgeted {
		c.Admitted = admit(read, plans, c.Results)
	}
	if e.Observe != nil {
		e.Observe.PublishUnbudgeted(unbudgetedSeries(c.Admitted))
	}
	next := make(map[decide.GroupKey]any, len(plans))
	for i, p := range plans {
		if c.Results[i].State != nil {
			next[p.Key] = c.Results[i].State
		}
	}
	e.RestoreAnalyzerState(next)
	c.Groups = len(plans)
	return plans, now
}

// publishGroups writes each decided variant's status and returns the metric
// samples for the cycle; a failed write keeps the last written sample so the
// gauges do not claim a decision nobody can see on the VA.
func (e *Engine) publishGroups(ctx context.Context, c *Cycle, views []decide.View, plans []decide.Plan, now time.Time) ([]VariantSample, []GroupSample) {
	targets := map[string]decide.Target{}
	for _, v := range views {
		targets[v.VA.Namespace+"/"+v.VA.Name] = v.Target
	}
	var samples []VariantSample
	var groups []GroupSample
	for i, p := range plans {
		res := c.Results[i]
		g := groupSample(p, res)
		groups = append(groups, g)
		for j, va := range p.VAs {
			t := res.Targets[j]
			tgt := targets[va.Namespace+"/"+va.Name]
			c.Variants++
			logDecision(p, va, t, res)
			sample := VariantSample{
				Labels:  [4]string{va.Name, va.Namespace, p.Key.ModelID, va.Spec.AcceleratorName},
				Desired: t.Replicas, Current: tgt.SpecReplicas, Cost: decide.VariantCost(va), Target: t,
			}
			if g.Rates != nil {
				sample.ReplicaRate, sample.HasReplicaRate = g.Rates.PerReplica[va.Name]
			}
			samples = append(samples, sample)
			if !e.publishVariant(ctx, c, p, va, res, t, tgt, now) {
				samples = keepLastWritten(samples, va)
			}
		}
	}
	return samples, groups
}

// publishVariant writes one variant's status with its config and stuck
// conditions; it reports false when the write failed.
func (e *Engine) publishVariant(ctx context.Context, c *Cycle, p decide.Plan, va *llmdv1alpha1.VariantAutoscaling, res decide.GroupResult, t decision.Target, tgt decide.Target, now time.Time) bool {
	status := decide.NextStatus(va, p, res, t, tgt, c.MetricsErr, now)
	if e.Config != nil {
		decide.SetConfigCondition(&status, va, entryProblems(e.Config.InvalidFor(p.Key.ModelID, p.Key.Namespace)), now)
	}
	if e.Pools != nil {
		if r, ok := e.Pools.Resolve(va.Namespace, tgt.PodLabels); ok {
			r.SetCondition(&status.Conditions, va.Generation, now)
		}
	}
	stuck := decide.SetStuckCondition(&status, va, res, now)
	var budgetEvent, budgetMsg string
	if a, ok := c.Admitted[va.Namespace+"/"+va.Name]; ok {
		budgetEvent, budgetMsg = setBudgetCondition(&status, va, a, now)
	}
	prev := va.Status.DesiredOptimizedAlloc
	wrote, err := e.publish(ctx, va, status, now)
	if errors.Is(err, ErrWokenMeanwhile) {
		klog.V(2).InfoS("decision not written: the variant was woken after this cycle read it; deciding again", "va", klog.KObj(va))
		e.Trigger()
		return false
	}
	if err != nil {
		c.WriteFailures++
		klog.ErrorS(err, "writing VariantAutoscaling status", "va", klog.KObj(va))
		return false
	}
	if wrote {
		c.StatusWrites++
	}
	e.recordChange(va, prev, t)
	// Once per onset: the condition written above is the memory,
	// so a new leader does not repeat it.
	if stuck != "" && e.Recorder != nil {
		e.Recorder.Event(va, corev1.EventTypeWarning, llmdv1alpha1.ReasonStuckTransition, stuck)
	}
	e.recordBudget(va, budgetEvent, budgetMsg)
	return true
}

// publishUnresolved writes the status of VAs whose scale target could not be
// resolved; they are in no group, so nothing else would tell their owner.
func (e *Engine) publishUnresolved(ctx context.Context, c *Cycle, views []decide.View, now time.Time) {
	for _, v := range views {
		if v.Target.Resolved {
			continue
		}
		status := decide.UnresolvedStatus(v.VA, v.Target, now)
		cond := meta.FindStatusCondition(status.Conditions, llmdv1alpha1.ConditionTypeTargetResolved)
		// One Event per onset or change of reason: the condition written
		// is the memory, so a new leader does not repeat it.
		reported := conditionIs(v.VA, llmdv1alpha1.ConditionTypeTargetResolved, metav1.ConditionFalse, cond.Reason)
		if _, err := e.publish(ctx, v.VA, status, now); err != nil {
			c.WriteFailures++
			klog.ErrorS(err, "writing VariantAutoscaling status", "va", klog.KObj(v.VA))
		}
		if e.Recorder != nil && !reported {
			e.Recorder.Event(v.VA, corev1.EventTypeWarning, cond.Reason, cond.Message)
		}
	}
}

// finishCycle publishes the cycle's metrics and marks success only when both
// collection and every write worked, so the health check sees partial cycles.
func (e *Engine) finishCycle(c Cycle, samples []VariantSample, groups []GroupSample, start time.Time) (Cycle, error) {
	if e.Observe != nil {
		e.Observe.Publish(samples, groups)
		e.Observe.CycleDuration.Observe(e.Clock.Since(start).Seconds())
		e.Observe.StatusWriteErrs.Add(float64(c.WriteFailures))
	}
	if c.MetricsErr == nil && c.WriteFailures == 0 {
		e.lastSuccess.Store(e.Clock.Now().UnixNano())
		if e.Observe != nil {
			e.Observe.LastSuccess.Set(float64(e.Clock.Now().Unix()))
		}
	}
	c.Duration = e.Clock.Since(start)
	klog.V(2).InfoS("engine cycle", "groups", c.Groups, "variants", c.Variants, "queries", c.Queries,
		"statusWrites", c.StatusWrites, "duration", c.Duration, "metricsError", c.MetricsErr)
	if c.WriteFailures > 0 {
		return c, fmt.Errorf("%d status writes failed", c.WriteFailures)
	}
	return c, nil
}

// publish writes the status unless, within the heartbeat, only lastRunTime
// and the reason's live figures moved: reasons quote KV averages that change
// every cycle, and rewriting 1,000 VAs every 30 s would be an update storm.
// Replica counts, rules (in the OptimizationReady message) and condition
// changes are written at once.
func (e *Engine) publish(ctx context.Context, va *llmdv1alpha1.VariantAutoscaling, status llmdv1alpha1.VariantAutoscalingStatus, now time.Time) (bool, error) {
	old := va.Status.DesiredOptimizedAlloc
	cmp := *status.DeepCopy()
	if !old.LastRunTime.IsZero() && now.Sub(old.LastRunTime.Time) < e.StatusHeartbeat {
		cmp.DesiredOptimizedAlloc.LastRunTime = old.LastRunTime
		cmp.DesiredOptimizedAlloc.Reason = old.Reason
	}
	if equality.Semantic.DeepEqual(cmp, va.Status) {
		return false, nil
	}
	return true, e.Status.WriteStatus(ctx, va, status)
}

// keepLastWritten makes the VA's sample (the last one) show what the
// provider and KEDA serve when the new decision could not be written (the
// status, held at 1 after a wake it predates): prometheus-adapter rules on
// wva_desired_replicas must serve the same. A VA never decided has no
// sample.
func keepLastWritten(samples []VariantSample, va *llmdv1alpha1.VariantAutoscaling) []VariantSample {
	if va.Status.DesiredOptimizedAlloc.LastRunTime.IsZero() {
		return samples[:len(samples)-1]
	}
	samples[len(samples)-1].Desired = va.ServedReplicas()
	return samples
}

func (e *Engine) recordChange(va *llmdv1alpha1.VariantAutoscaling, prev llmdv1alpha1.OptimizedAlloc, t decision.Target) {
	if e.Recorder == nil || (prev.NumReplicas == t.Replicas && !prev.LastUpdate.IsZero()) {
		return
	}
	e.Recorder.Eventf(va, corev1.EventTypeNormal, "DesiredReplicasChanged", "desired replicas %d -> %d (%s): %s",
		prev.NumReplicas, t.Replicas, t.Rule, t.Reason)
}

func (e *Engine) observeCollection(res collector.Result, err error) {
	if e.Observe == nil {
		return
	}
	e.Observe.QueriesPerCycle.Set(float64(res.Queries))
	for d, n := range res.Dropped {
		e.Observe.DroppedSamples.WithLabelValues(d.Query, d.Reason).Add(float64(n))
	}
	var qe *collector.QueryError
	if errors.As(err, &qe) {
		e.Observe.QueryErrors.WithLabelValues(qe.Query).Inc()
	}
}

// logDropped names each dropped sample's variant (the VA whose Ready pod
// reported it), or its model for the per-model queries.
func logDropped(dropped []collector.DroppedSample, views []decide.View) {
	if len(dropped) == 0 || !klog.V(2).Enabled() {
		return
	}
	variantOf := map[collector.PodKey]*llmdv1alpha1.VariantAutoscaling{}
	for _, v := range views {
		for _, pod := range v.Target.ReadyPods {
			variantOf[collector.PodKey{Namespace: v.VA.Namespace, Pod: pod}] = v.VA
		}
	}
	for _, d := range dropped {
		kv := []any{"query", d.Query, "reason", d.Reason, "value", d.Value, "namespace", d.Namespace}
		switch {
		case d.Pod != "":
			kv = append(kv, "pod", d.Pod)
			if va := variantOf[collector.PodKey{Namespace: d.Namespace, Pod: d.Pod}]; va != nil {
				kv = append(kv, "va", klog.KObj(va), "model", va.Spec.ModelID)
			}
		case d.Model != "":
			kv = append(kv, "model", d.Model)
		}
		klog.V(2).InfoS("dropped metric sample", kv...)
	}
}

func logDecision(p decide.Plan, va *llmdv1alpha1.VariantAutoscaling, t decision.Target, res decide.GroupResult) {
	prev := va.Status.DesiredOptimizedAlloc.NumReplicas
	level := klog.Level(2)
	if prev != t.Replicas {
		level = 0
	}
	klog.V(level).InfoS("decision", "va", klog.KObj(va), "model", p.Key.ModelID, "analyzer", res.Analyzer,
		"metrics", p.Input.Metrics, "previous", prev, "desired", t.Replicas, "action", t.Action, "rule", t.Rule, "reason", t.Reason)
}

func groupSample(p decide.Plan, res decide.GroupResult) GroupSample {
	g := GroupSample{Labels: [2]string{p.Key.Namespace, p.Key.ModelID},
		MetricsAvailable: p.Input.Metrics == decide.MetricsAvailable && !p.Input.RequestCountMissing()}
	if a, ok := res.Analysis.(analyzer.SpareReporter); ok {
		g.HasAnalysis = true
		g.AvgSpareKv, g.AvgSpareQueue = a.Spare()
	}
	if a, ok := res.Analysis.(analyzer.RateReporter); ok {
		r := a.Rates()
		g.Rates = &r
	}
	return g
}

func anyLimited(plans []decide.Plan) bool {
	for _, p := range plans {
		if p.Input.Config.Scaling.EnableLimiter {
			return true
		}
	}
	return false
}

// conditionIs: the VA has condType with this status and reason.
func conditionIs(va *llmdv1alpha1.VariantAutoscaling, condType string, status metav1.ConditionStatus, reason string) bool {
	c := meta.FindStatusCondition(va.Status.Conditions, condType)
	return c != nil && c.Status == status && c.Reason == reason
}

func namespacesOf(views []decide.View) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range views {
		if !seen[v.VA.Namespace] {
			seen[v.VA.Namespace] = true
			out = append(out, v.VA.Namespace)
		}
	}
	sort.Strings(out)
	return out
}
