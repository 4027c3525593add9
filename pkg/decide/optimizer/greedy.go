package optimizer

import (
	"container/heap"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/wva-project/wva/pkg/decision"
)

// GreedyByScore is the limited mode (enableLimiter: true). Each group is
// first decided as the cost-aware mode would; when the scale-ups together
// need more GPUs of some accelerator than Budget holds, replicas are granted
// one at a time to the group with the highest score
//
//	score = priority * (required capacity not yet granted) / (required capacity)
//
// (ties: higher priority, then model ID and namespace), on the group's
// cheapest eligible variant whose accelerator still has room. Scores fall
// as a group is served, so groups of equal priority are served in turn and
// a priority-2 group gets twice the share of a priority-1 group. A group
// whose cheapest variant's accelerator is exhausted moves to its next
// variant. Scale-downs and holds pass through unchanged. The budget is never
// exceeded; only minReplicas floors, which the enforcer applies to every
// decision, can add replicas beyond it.
type GreedyByScore struct {
	Budget decision.Free
}

// Name implements Optimizer.
func (GreedyByScore) Name() string { return "greedy-by-score" }

type claim struct {
	idx      int
	group    decision.Group
	sig      decision.Signal
	priority float64
	eligible []decision.Variant // cheapest per unit of capacity first
	required float64
	left     float64
	granted  map[string]int32
	// skipped names the variants passed over because their accelerator's
	// budget ran out, with the accelerator.
	skipped map[string]string
	// planned, for a signal with an exact mix (Signal.PlannedReplicas), is
	// the replicas it adds per variant: the claim grants at most these.
	planned map[string]int32
}

func (c *claim) score() float64 { return c.priority * c.left / c.required }

// Optimize implements Optimizer. Result i answers request i.
func (o GreedyByScore) Optimize(reqs []Request) [][]decision.Target {
	out := make([][]decision.Target, len(reqs))
	var claims []*claim
	for i, r := range reqs {
		out[i] = OptimizeGroup(r.Group, r.Signal)
		if r.Signal.Hold || !positive(r.Signal.RequiredCapacity) {
			continue
		}
		c := &claim{idx: i, group: r.Group, sig: r.Signal, priority: r.Signal.Priority,
			required: r.Signal.RequiredCapacity, left: r.Signal.RequiredCapacity, granted: map[string]int32{}, skipped: map[string]string{}}
		if !(c.priority > 0) || math.IsInf(c.priority, 0) {
			c.priority = 1
		}
		c.eligible = eligibleForScaleUp(r.Group.Variants, r.Signal)
		if len(r.Signal.PlannedReplicas) > 0 {
			c.plan()
			if c.required <= 0 {
				continue
			}
		}
		claims = append(claims, c)
	}
	if len(claims) == 0 {
		return out
	}

	free := o.Budget.Copy()
	if free == nil {
		free = decision.Free{}
	}
	initial := free.Copy()
	h := claimHeap(append([]*claim(nil), claims...))
	heap.Init(&h)
	for h.Len() > 0 {
		c := h[0]
		// One replica at a time would pick c again while its score stays
		// above the runner-up's; grant that run at once.
		next := 0.0
		if h.Len() > 1 {
			next = h[1].score()
			if h.Len() > 2 {
				next = math.Max(next, h[2].score())
			}
		}
		if !c.grant(free, next) || c.left <= 0 {
			heap.Pop(&h)
			continue
		}
		heap.Fix(&h, 0)
	}

	acct := &accounts{initial: initial, left: free, claims: claims}
	for _, c := range claims {
		wish := c.wish()
		if sameCounts(wish, c.granted) {
			continue // the budget did not bind: the cost-aware targets stand
		}
		out[c.idx] = c.targets(out[c.idx], wish, acct)
	}
	return out
}

// eligibleForScaleUp are the variants the cost-aware mode may grow (no
// pending replicas, below max), cheapest per unit of useful capacity, or of
// capacity, first (ties: alphabetically first).
func eligibleForScaleUp(variants []decision.Variant, sig decision.Signal) []decision.Variant {
	var out []decision.Variant
	for _, v := range variants {
		if v.PendingReplicas == 0 && v.CurrentReplicas < v.MaxReplicas {
			out = append(out, v)
		}
	}
	sortByUnitCost(out, sig, false)
	return out
}

// plan limits the claim to an exact mix's additions: eligible are the
// variants it grows (replicas it counts as pending are its own supply),
// and the capacity required is what those additions carry.
func (c *claim) plan() {
	c.planned = map[string]int32{}
	var eligible []decision.Variant
	c.required = 0
	for _, v := range c.group.Variants {
		want := decision.Clamp(c.sig.PlannedReplicas[v.Name], v.MinReplicas, v.MaxReplicas)
		if _, ok := c.sig.PlannedReplicas[v.Name]; !ok || want <= v.CurrentReplicas {
			continue
		}
		c.planned[v.Name] = want - v.CurrentReplicas
		c.required += float64(want-v.CurrentReplicas) * c.sig.CapacityOf(v.Name)
		eligible = append(eligible, v)
	}
	sortByUnitCost(eligible, c.sig, false)
	c.eligible, c.left = eligible, c.required
}

// grant adds replicas to the cheapest eligible variant with headroom whose
// accelerator has room in the budget: one, plus as many more as keep the
// claim's score above next (what one-at-a-time granting would also give
// it), within the variant's headroom, the budget and what is still needed.
// It reports whether it could add any.
func (c *claim) grant(free decision.Free, next float64) bool {
	for _, v := range c.eligible {
		headroom := int64(v.MaxReplicas) - int64(v.CurrentReplicas) - int64(c.granted[v.Name])
		if c.planned != nil {
			headroom = int64(c.planned[v.Name]) - int64(c.granted[v.Name])
		}
		if headroom <= 0 {
			continue
		}
		need := decision.GPUsPerReplica(v)
		left, limited := free[v.Accelerator]
		if limited && left < need {
			c.skipped[v.Name] = v.Accelerator
			continue
		}
		capacity := c.sig.CapacityOf(v.Name)
		n := min(headroom, ceilInt(c.left/capacity))
		if run := ceilInt((c.left - next*c.required/c.priority) / capacity); run < n {
			n = max(1, run)
		}
		if limited {
			n = min(n, left/need)
			free[v.Accelerator] -= n * need
		}
		c.granted[v.Name] += int32(n)
		c.left -= float64(n) * capacity
		return true
	}
	return false
}

// ceilInt is ceil(x) as an int64, saturating, and at least 1.
func ceilInt(x float64) int64 {
	switch {
	case !(x > 1):
		return 1
	case x >= math.MaxInt32:
		return math.MaxInt32
	}
	return int64(math.Ceil(x))
}

// wish is what the group would get without a budget: the cost-aware
// scale-up (ceil(left / capacity) on each variant in cost order, within
// its headroom).
func (c *claim) wish() map[string]int32 {
	if c.planned != nil {
		return c.planned
	}
	w := map[string]int32{}
	left := c.required
	for _, v := range c.eligible {
		if left <= 0 {
			break
		}
		capacity := c.sig.CapacityOf(v.Name)
		n := int32(math.Min(math.Ceil(left/capacity), float64(v.MaxReplicas-v.CurrentReplicas)))
		if n > 0 {
			w[v.Name] = n
			left -= float64(n) * capacity
		}
	}
	return w
}

func sameCounts(a, b map[string]int32) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}

// targets rewrites the group's cost-aware targets with what was granted and
// says in each changed target what was cut and why.
func (c *claim) targets(base []decision.Target, wish map[string]int32, acct *accounts) []decision.Target {
	met := 100 * math.Min(1, (c.required-math.Max(0, c.left))/c.required)
	head := fmt.Sprintf("GPU limiter (greedy by score, priority %g): granted %s where unlimited would add %s; %.0f%% of required capacity met",
		c.priority, counts(c.granted), counts(wish), met)
	var exhausted []string
	for _, name := range slices.Sorted(maps.Keys(c.skipped)) {
		exhausted = append(exhausted, fmt.Sprintf("%s (%s)", name, c.skipped[name]))
	}
	out := append([]decision.Target(nil), base...)
	for i, t := range out {
		v, ok := c.group.Variant(t.Variant)
		if !ok || wish[v.Name] == c.granted[v.Name] {
			continue
		}
		n := decision.Clamp(v.CurrentReplicas+c.granted[v.Name], v.MinReplicas, v.MaxReplicas)
		var why string
		if c.granted[v.Name] < wish[v.Name] {
			why = fmt.Sprintf("%s; %s +%d cut to +%d: %s", head, v.Name, wish[v.Name], c.granted[v.Name], acct.of(v))
		} else {
			why = fmt.Sprintf("%s; %s +%d instead, GPU budget exhausted for %s", head, v.Name, c.granted[v.Name]-wish[v.Name], strings.Join(exhausted, ", "))
		}
		out[i] = decision.Target{Variant: v.Name, Replicas: n, Action: decision.ActionFor(v.CurrentReplicas, n), Rule: decision.RuleGPULimited,
			Reason: why + "; " + c.sig.Reason}
	}
	return out
}

// counts writes {+2 a, +1 b}, or "nothing".
func counts(m map[string]int32) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(m)) {
		if m[name] > 0 {
			parts = append(parts, fmt.Sprintf("+%d %s", m[name], name))
		}
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// accounts explains where each accelerator's budget went, computed once
// per accelerator.
type accounts struct {
	initial, left decision.Free
	claims        []*claim
	takers        map[string]string
}

func (a *accounts) of(v decision.Variant) string {
	total, limited := a.initial[v.Accelerator]
	if !limited {
		return "no eligible headroom"
	}
	if a.takers == nil {
		a.takers = a.summarize()
	}
	s := fmt.Sprintf("%s budget %d GPUs, %d left, %d per replica", v.Accelerator, total, a.left[v.Accelerator], decision.GPUsPerReplica(v))
	if t := a.takers[v.Accelerator]; t != "" {
		s += "; granted to " + t
	}
	return s
}

// summarize lists, per accelerator, the three groups granted the most GPUs.
func (a *accounts) summarize() map[string]string {
	type taker struct {
		name     string
		priority float64
		gpus     int64
	}
	per := map[string][]taker{}
	for _, c := range a.claims {
		gpus := map[string]int64{}
		for _, w := range c.group.Variants {
			if n := c.granted[w.Name]; n > 0 {
				gpus[w.Accelerator] += int64(n) * decision.GPUsPerReplica(w)
			}
		}
		for acc, n := range gpus {
			per[acc] = append(per[acc], taker{c.group.Namespace + "/" + c.group.ModelID, c.priority, n})
		}
	}
	out := map[string]string{}
	for acc, takers := range per {
		sort.Slice(takers, func(i, j int) bool {
			if takers[i].gpus != takers[j].gpus {
				return takers[i].gpus > takers[j].gpus
			}
			return takers[i].name < takers[j].name
		})
		var parts []string
		for i, t := range takers {
			if i == 3 {
				parts = append(parts, fmt.Sprintf("%d more", len(takers)-3))
				break
			}
			parts = append(parts, fmt.Sprintf("%s %d (priority %g)", t.name, t.gpus, t.priority))
		}
		out[acc] = strings.Join(parts, ", ")
	}
	return out
}

// claimHeap orders claims by score, highest first.
type claimHeap []*claim

func (h claimHeap) Len() int { return len(h) }
func (h claimHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	if sa, sb := a.score(), b.score(); sa != sb {
		return sa > sb
	}
	if a.priority != b.priority {
		return a.priority > b.priority
	}
	if a.group.ModelID != b.group.ModelID {
		return a.group.ModelID < b.group.ModelID
	}
	if a.group.Namespace != b.group.Namespace {
		return a.group.Namespace < b.group.Namespace
	}
	return a.idx < b.idx
}
func (h claimHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *claimHeap) Push(x any)   { *h = append(*h, x.(*claim)) }
func (h *claimHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
