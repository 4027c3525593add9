package budget

import (
	"fmt"
	"strings"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
)

// Unbudgeted says what the engine does with a scale-up of a variant no
// budget covers (Coverage not Budgeted, the pool known).
type Unbudgeted string

const (
	// UnbudgetedUnlimited admits it (GPUs are still checked where a pool
	// limits them).
	UnbudgetedUnlimited Unbudgeted = "unlimited"
	// UnbudgetedRefuse holds the variant at its current replicas.
	UnbudgetedRefuse Unbudgeted = "refuse"
)

// ParseUnbudgeted reads --unbudgeted-variants.
func ParseUnbudgeted(s string) (Unbudgeted, error) {
	switch u := Unbudgeted(s); u {
	case UnbudgetedUnlimited, UnbudgetedRefuse:
		return u, nil
	}
	return "", fmt.Errorf("--unbudgeted-variants=%q: want %s or %s", s, UnbudgetedUnlimited, UnbudgetedRefuse)
}

// Coverage says whether a budget covers a variant's scale-ups: Reason is
// one of the GPUBudgeted condition's reasons, Message says why for people.
type Coverage struct {
	Pool    string
	Reason  string
	Message string
}

// Budgeted reports whether both of the pool's limits can be checked.
func (c Coverage) Budgeted() bool { return c.Reason == llmdv1alpha1.ReasonBudgeted }

// Cover is v's coverage by usage (nil: no pool defined).
func Cover(v Variant, usage map[string]Usage) Coverage {
	if v.Pool == "" || usage == nil {
		return Coverage{Reason: llmdv1alpha1.ReasonNoPool,
			Message: "no GPU budget pool applies: set the " + llmdv1alpha1.AnnotationNodePool + " annotation, a pod-template nodeSelector a pool selects, or an acceleratorName a pool is named after"}
	}
	u, ok := usage[v.Pool]
	if !ok {
		return Coverage{Pool: v.Pool, Reason: llmdv1alpha1.ReasonUnknownPool,
			Message: fmt.Sprintf("assigned to pool %q, which the budget does not define: scale-ups are refused", v.Pool)}
	}
	if u.Total.GPUMemory != Unlimited && v.PerReplica.GPUMemory <= 0 {
		return Coverage{Pool: v.Pool, Reason: llmdv1alpha1.ReasonNoGPUMemoryPerReplica,
			Message: fmt.Sprintf("pool %s limits GPU memory (%s) but spec.gpuMemoryPerReplica is unset: its replicas count as 0 bytes", v.Pool, u.Total)}
	}
	return Coverage{Pool: v.Pool, Reason: llmdv1alpha1.ReasonBudgeted, Message: fmt.Sprintf("pool %s (budget %s)", v.Pool, u.Total)}
}

// Ledger admits a cycle's scale-ups one after the other against the pools'
// usage and the namespaces' GPU quotas: each admitted replica is taken out
// of its pool and its namespace's quotas, so two variants never both get
// the same free GPUs.
type Ledger struct {
	usage  map[string]Usage
	policy Unbudgeted
	// models names each variant key's model in reasons.
	models map[string]string
	// quotas by namespace.
	quotas map[string][]Quota
}

// NewLedger copies usage (nil: no pool is defined). models maps variant
// keys ("namespace/name") to their model IDs.
func NewLedger(usage map[string]Usage, policy Unbudgeted, models map[string]string) *Ledger {
	l := &Ledger{policy: policy, models: models}
	if usage != nil {
		l.usage = make(map[string]Usage, len(usage))
		for k, u := range usage {
			u.Holders = append([]Holder(nil), u.Holders...)
			l.usage[k] = u
		}
	}
	return l
}

// WithQuotas makes the ledger also admit against the namespaces' GPU
// quotas (see EffectiveQuotas for what their used should count).
func (l *Ledger) WithQuotas(quotas []Quota) *Ledger {
	l.quotas = map[string][]Quota{}
	for _, q := range quotas {
		l.quotas[q.Namespace] = append(l.quotas[q.Namespace], q)
	}
	return l
}

// Admission is the outcome of one scale-up.
type Admission struct {
	Replicas int32
	// Reason is why the scale-up was cut ("" when admitted as asked).
	Reason string
	// Blockers hold the rest of the pool, largest first (none when a quota
	// cut it).
	Blockers []Holder
	// Quota is the namespace quota that cut it (nil when the pool did).
	Quota *Quota
}

// Cut reports whether the scale-up was not admitted in full.
func (a Admission) Cut() bool { return a.Reason != "" }

// Admit admits v's scale-up from current to desired replicas: the largest
// count whose added GPUs and GPU memory fit both what its pool has left
// and what its namespace's GPU quotas have left (the tighter wins). v's own
// current holding is already in the pool's usage, so it only needs room for
// the added replicas. A variant without gpusPerReplica counts 1 GPU per
// replica, as the GPU limiter does. Scale-downs and holds pass unchanged.
func (l *Ledger) Admit(v Variant, current, desired int32) Admission {
	if desired <= current {
		return Admission{Replicas: desired}
	}
	cov := Cover(v, l.usage)
	switch {
	case cov.Reason == llmdv1alpha1.ReasonUnknownPool:
		return Admission{Replicas: current, Reason: fmt.Sprintf("GPU budget: %s +%d refused: %s", v.Key, desired-current, cov.Message)}
	case cov.Reason == llmdv1alpha1.ReasonNoPool && l.policy == UnbudgetedRefuse,
		cov.Reason == llmdv1alpha1.ReasonNoGPUMemoryPerReplica && l.policy == UnbudgetedRefuse:
		return Admission{Replicas: current, Reason: fmt.Sprintf("GPU budget: %s +%d refused (--unbudgeted-variants=refuse): %s",
			v.Key, desired-current, cov.Message)}
	}
	pooled := cov.Reason != llmdv1alpha1.ReasonNoPool
	per := v.PerReplica
	per.GPUs = max(1, per.GPUs)
	want := int64(desired - current)
	n := want
	var u Usage
	var left Amount
	if pooled {
		u = l.usage[v.Pool]
		left = u.Available()
		if left.GPUs != Unlimited {
			n = min(n, left.GPUs/per.GPUs)
		}
		if left.GPUMemory != Unlimited && per.GPUMemory > 0 {
			n = min(n, left.GPUMemory/per.GPUMemory)
		}
		n = max(0, n)
	}
	byPool := n
	q, quotaCut := l.tightestQuota(v.Namespace, per.GPUs, n)
	if quotaCut {
		n = max(0, q.Room()/per.GPUs)
	}
	if pooled {
		l.take(v.Pool, v.Key, per.Times(n))
	}
	l.takeQuota(v.Namespace, per.GPUs*n)
	switch {
	case n == want:
		return Admission{Replicas: desired}
	case quotaCut && n < byPool:
		return Admission{Replicas: current + int32(n), Quota: &q,
			Reason: fmt.Sprintf("GPU quota: %s +%d (%d GPUs each) cut to +%d: %s has %d GPUs left",
				v.Key, want, per.GPUs, n, q, q.Room())}
	}
	var others []Holder
	for _, h := range u.Holders {
		if h.Name != v.Key {
			others = append(others, h)
		}
	}
	held := "the variant itself"
	if len(others) > 0 {
		held = l.Describe(others)
	}
	return Admission{Replicas: current + int32(n), Blockers: l.Annotate(others),
		Reason: fmt.Sprintf("GPU budget: %s +%d (%s each) cut to +%d: pool %s has %s left of %s, held by %s",
			v.Key, want, per, n, v.Pool, left, u.Total, held)}
}

// tightestQuota is the namespace's quota with the least room, and whether
// it admits fewer than n replicas of gpus each.
func (l *Ledger) tightestQuota(ns string, gpus, n int64) (Quota, bool) {
	var tight Quota
	found := false
	for _, q := range l.quotas[ns] {
		if !found || q.Room() < tight.Room() {
			tight, found = q, true
		}
	}
	return tight, found && tight.Room()/gpus < n
}

// takeQuota counts gpus against every quota of ns.
func (l *Ledger) takeQuota(ns string, gpus int64) {
	for i := range l.quotas[ns] {
		l.quotas[ns][i].Used += gpus
	}
}

// Annotate fills in the holders' namespaces and the models of those that
// are variants, for machine-readable refusals (the activator's 429).
func (l *Ledger) Annotate(h []Holder) []Holder {
	out := make([]Holder, len(h))
	for i, x := range h {
		x.Model = l.models[x.Name]
		name := strings.TrimPrefix(x.Name, "pod ")
		if ns, _, ok := strings.Cut(name, "/"); ok {
			x.Namespace = ns
		}
		out[i] = x
	}
	return out
}

// take adds a to key's holding in pool.
func (l *Ledger) take(pool, key string, a Amount) {
	if a.IsZero() {
		return
	}
	u := l.usage[pool]
	u.Allocated = u.Allocated.Add(a)
	found := false
	for i := range u.Holders {
		if u.Holders[i].Name == key {
			u.Holders[i].Amount = u.Holders[i].Amount.Add(a)
			found = true
		}
	}
	if !found {
		u.Holders = append(u.Holders, Holder{Name: key, Amount: a})
	}
	SortHolders(u.Holders)
	l.usage[pool] = u
}

// Describe renders holders with their models: "team-b/big (model org/big,
// 2 GPUs, 120Gi GPU memory), pod batch/train-0 (1 GPUs)".
func (l *Ledger) Describe(h []Holder) string {
	if len(h) == 0 {
		return "nothing"
	}
	parts := make([]string, 0, len(h))
	for _, x := range h {
		if m, ok := l.models[x.Name]; ok {
			parts = append(parts, fmt.Sprintf("%s (model %s, %s)", x.Name, m, x.Amount))
		} else {
			parts = append(parts, fmt.Sprintf("%s (%s)", x.Name, x.Amount))
		}
	}
	return strings.Join(parts, ", ")
}
