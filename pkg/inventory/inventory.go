package inventory

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	appslisters "k8s.io/client-go/listers/apps/v1"
	autoscalinglisters "k8s.io/client-go/listers/autoscaling/v2"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/decision"
	llmdlisters "github.com/wva-project/wva/pkg/generated/listers/llmd/v1alpha1"
)

// Inventory reads VAs, their targets and pods from listers.
type Inventory struct {
	VAs          llmdlisters.VariantAutoscalingLister
	Deployments  appslisters.DeploymentLister
	StatefulSets appslisters.StatefulSetLister
	Pods         corelisters.PodLister
	// LeaderWorkerSets is nil when the LWS API is not installed.
	LeaderWorkerSets cache.GenericLister
	// HPAs and ScaledObjects (nil when KEDA is not installed), when set,
	// add the objects opted in by annotations as variants ;
	// Memory then holds their status and Warner reports the ones left out.
	HPAs          autoscalinglisters.HorizontalPodAutoscalerLister
	ScaledObjects cache.GenericLister
	Memory        *Memory
	Warner        *Warner
}

// Views lists every VA with its resolved target, sorted by namespace/name.
func (inv *Inventory) Views() ([]decision.View, error) {
	vas, err := inv.VAs.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list VariantAutoscalings: %w", err)
	}
	sources, err := inv.optInSources()
	if err != nil {
		return nil, err
	}
	if inv.HPAs != nil || inv.ScaledObjects != nil {
		optedIn, problems := OptInVariants(vas, sources)
		if inv.Memory != nil {
			inv.Memory.Sync(optedIn)
		}
		if inv.Warner != nil {
			inv.Warner.Report(problems)
		}
		vas = append(vas, optedIn...)
	}
	sort.Slice(vas, func(i, j int) bool {
		if vas[i].Namespace != vas[j].Namespace {
			return vas[i].Namespace < vas[j].Namespace
		}
		return vas[i].Name < vas[j].Name
	})
	views := make([]decision.View, 0, len(vas))
	for _, va := range vas {
		views = append(views, decision.View{VA: va, Target: inv.Resolve(va)})
	}
	return views, nil
}

// optInSources lists the HPAs and ScaledObjects that may opt in.
func (inv *Inventory) optInSources() ([]OptInSource, error) {
	var out []OptInSource
	if inv.HPAs != nil {
		hpas, err := inv.HPAs.List(labels.Everything())
		if err != nil {
			return nil, fmt.Errorf("list HorizontalPodAutoscalers: %w", err)
		}
		for _, h := range hpas {
			out = append(out, HPASource(h))
		}
	}
	if inv.ScaledObjects != nil {
		sos, err := inv.ScaledObjects.List(labels.Everything())
		if err != nil {
			return nil, fmt.Errorf("list ScaledObjects: %w", err)
		}
		for _, o := range sos {
			if u, ok := o.(*unstructured.Unstructured); ok {
				out = append(out, ScaledObjectSource(u))
			}
		}
	}
	return out, nil
}

// Targets are the inventory's listers of scale targets.
func (inv *Inventory) Targets() TargetListers {
	return TargetListers{Deployments: inv.Deployments, StatefulSets: inv.StatefulSets, LeaderWorkerSets: inv.LeaderWorkerSets}
}

// Resolve finds a VA's target (ResolveTarget), its replica count and
// its pods.
func (inv *Inventory) Resolve(va *llmdv1alpha1.VariantAutoscaling) decision.InventoryTarget {
	st, err := ResolveTarget(inv.Targets(), va)
	if err != nil {
		var u *Unresolved
		if errors.As(err, &u) {
			return decision.InventoryTarget{Reason: u.Reason, Message: u.Message}
		}
		return decision.InventoryTarget{Reason: llmdv1alpha1.ReasonTargetNotFound, Message: err.Error()}
	}
	t := decision.InventoryTarget{Resolved: true, SpecReplicas: st.Replicas, PodSelector: st.PodSelector, NodeSelector: st.Template.NodeSelector}
	t.MaxNumSeqs, t.MaxNumBatchedTokens = EngineArgs(&st.Template)
	t.StartupAllowance = StartupAllowance(&st.Template)
	t.Role = RoleOf(st.TemplateLabels)
	t.PodLabels = st.TemplateLabels
	if r, ok := RoleOverride(va); ok {
		t.Role = r
	}
	// The serving pods (an LWS's leaders) are the replicas the engine counts.
	pods, err := inv.Pods.Pods(va.Namespace).List(st.ServingSelector)
	if err != nil {
		return decision.InventoryTarget{Reason: llmdv1alpha1.ReasonTargetNotFound, Message: err.Error()}
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	var ready []*corev1.Pod
	for _, p := range pods {
		switch {
		case p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
			continue
		case PodReady(p):
			t.ReadyPods = append(t.ReadyPods, p.Name)
			if at := readySince(p); !at.IsZero() {
				if t.ReadyAt == nil {
					t.ReadyAt = map[string]time.Time{}
				}
				t.ReadyAt[p.Name] = at
			}
			ready = append(ready, p)
		default:
			t.PendingPods++
		}
	}
	t.StartupDelay = StartupDelay(ready)
	return t
}

// RoleOf reads the llm-d.ai/role label of a pod template: prefill or
// decode, and both (whole requests) when absent or any other value, so a
// typo never splits a group.
func RoleOf(templateLabels map[string]string) decision.Role {
	switch r := decision.Role(strings.ToLower(strings.TrimSpace(templateLabels[llmdv1alpha1.LabelRole]))); r {
	case decision.RolePrefill, decision.RoleDecode:
		return r
	default:
		return decision.RoleBoth
	}
}

// MaxStartupSample is the longest creation-to-Ready time StartupDelay
// takes as a start-up: a Ready transition later than that is a readiness
// flap or a container restart of a long-running pod, not its start-up.
const MaxStartupSample = time.Hour

// StartupDelay is the median time from creation to the Ready condition's
// lastTransitionTime over the pods whose Ready condition is True, skipping
// transitions later than MaxStartupSample after creation (and missing or
// negative times); 0 when no pod gives a sample.
func StartupDelay(pods []*corev1.Pod) time.Duration {
	var samples []time.Duration
	for _, p := range pods {
		for _, c := range p.Status.Conditions {
			if c.Type != corev1.PodReady || c.Status != corev1.ConditionTrue {
				continue
			}
			if p.CreationTimestamp.IsZero() || c.LastTransitionTime.IsZero() {
				break
			}
			if d := c.LastTransitionTime.Sub(p.CreationTimestamp.Time); d >= 0 && d <= MaxStartupSample {
				samples = append(samples, d)
			}
			break
		}
	}
	if len(samples) == 0 {
		return 0
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	mid := len(samples) / 2
	if len(samples)%2 == 1 {
		return samples[mid]
	}
	return (samples[mid-1] + samples[mid]) / 2
}

// EngineArgs finds vLLM's --max-num-seqs and --max-num-batched-tokens in
// the containers' command and args, as "--flag=N" or "--flag N", also
// inside a shell command line ("sh -c 'vllm serve ... --max-num-seqs 64'").
// A flag absent, not a positive integer, or set from an environment
// variable reads 0, and the analyzers use vLLM's default.
func EngineArgs(spec *corev1.PodSpec) (maxNumSeqs, maxNumBatchedTokens int64) {
	for _, c := range spec.Containers {
		var words []string
		for _, a := range append(append([]string(nil), c.Command...), c.Args...) {
			words = append(words, strings.Fields(a)...)
		}
		for i, w := range words {
			name, value, hasValue := strings.Cut(w, "=")
			if !hasValue && i+1 < len(words) {
				value = words[i+1]
			}
			n, err := strconv.ParseInt(strings.Trim(value, `"'`), 10, 64)
			if err != nil || n <= 0 {
				continue
			}
			switch name {
			case "--max-num-seqs":
				maxNumSeqs = n
			case "--max-num-batched-tokens":
				maxNumBatchedTokens = n
			}
		}
	}
	return maxNumSeqs, maxNumBatchedTokens
}

// StartupAllowance is the longest time a container's startupProbe lets it
// start: initialDelaySeconds + failureThreshold x periodSeconds, with the
// Kubernetes defaults (3 failures, 10 s period); 0 when no container has a
// startupProbe.
func StartupAllowance(spec *corev1.PodSpec) time.Duration {
	var longest time.Duration
	for _, c := range spec.Containers {
		p := c.StartupProbe
		if p == nil {
			continue
		}
		failures, period := p.FailureThreshold, p.PeriodSeconds
		if failures <= 0 {
			failures = 3
		}
		if period <= 0 {
			period = 10
		}
		// Saturated: int32 x int32 seconds overflows a Duration, and a
		// wrapped (negative) allowance would end a wake's grace at once.
		probing := decision.MulDuration(decision.MulDuration(time.Second, int64(failures)), int64(period))
		d := decision.AddDurations(decision.MulDuration(time.Second, int64(max(p.InitialDelaySeconds, 0))), probing)
		longest = max(longest, d)
	}
	return longest
}

// readySince is the Ready condition's lastTransitionTime (zero if unset).
func readySince(p *corev1.Pod) time.Time {
	c, _ := readyCondition(p)
	return c.LastTransitionTime.Time
}

// PodReady reports whether the pod's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	c, ok := readyCondition(p)
	return ok && c.Status == corev1.ConditionTrue
}

// readyCondition is the pod's Ready condition, if it has one.
func readyCondition(p *corev1.Pod) (corev1.PodCondition, bool) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c, true
		}
	}
	return corev1.PodCondition{}, false
}
