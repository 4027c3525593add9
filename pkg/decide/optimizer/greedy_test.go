package optimizer

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/decision"
)

// req is one group of one variant per accelerator given, each replica
// worth 1 unit of capacity.
func req(model string, priority, required float64, vs ...v) Request {
	return Request{
		Group:  decision.Group{ModelID: model, Namespace: "ns", Variants: vs},
		Signal: decision.Signal{RequiredCapacity: required, Priority: priority, Reason: "test"},
	}
}

func gpuVariant(name, acc string, gpus, current, maxR int32, cost float64) v {
	return v{Name: name, Accelerator: acc, GPUsPerReplica: gpus, CurrentReplicas: current, MinReplicas: 1, MaxReplicas: maxR, Cost: cost}
}

// Three groups want 4 replicas each of 1 H100 GPU; 6 GPUs are free.
// Score = priority * unmet fraction, one grant at a time:
//
//  1. a 2.0 -> a has 1, score 1.5      4. b 1.0 (ties c, model order) -> 0.75
//  2. a 1.5 -> a has 2, score 1.0      5. c 1.0 -> 0.75
//  3. a/b/c all 1.0: a by priority     6. b 0.75 (ties c) -> budget spent
//     -> a has 3, score 0.5
//
// a +3, b +2, c +1: the priority-2 group gets the larger share, equal
// priorities share in turn, and the 6 GPUs are never exceeded.
func TestGreedyPriorityShares(t *testing.T) {
	reqs := []Request{
		req("a", 2, 4, gpuVariant("a", "H100", 1, 1, 10, 1)),
		req("b", 1, 4, gpuVariant("b", "H100", 1, 1, 10, 1)),
		req("c", 1, 4, gpuVariant("c", "H100", 1, 1, 10, 1)),
	}
	out := GreedyByScore{Budget: decision.Free{"H100": 6}}.Optimize(reqs)
	got := map[string]int32{}
	for _, ts := range out {
		for _, t := range ts {
			got[t.Variant] = t.Replicas - 1
		}
	}
	assert.Equal(t, map[string]int32{"a": 3, "b": 2, "c": 1}, got)
	for i, ts := range out {
		assert.Equal(t, decision.RuleGPULimited, ts[0].Rule, "group %d", i)
		assert.Contains(t, ts[0].Reason, "cut to")
		assert.Contains(t, ts[0].Reason, "H100 budget 6 GPUs, 0 left")
	}
	assert.Contains(t, out[2][0].Reason, "granted to ns/a 3 (priority 2), ns/b 2 (priority 1), ns/c 1 (priority 1)")
}

func TestGreedyMovesToAnotherAccelerator(t *testing.T) {
	// The H100 variant is cheaper per unit but only 1 replica fits; the
	// rest goes to the L4 variant (capacity 1 each vs 4 for the H100).
	r := req("m", 1, 10, gpuVariant("h", "H100", 2, 1, 10, 8), gpuVariant("l", "L4", 1, 1, 10, 5))
	r.Signal.CapacityPerReplica = map[string]float64{"h": 4, "l": 1}
	// Unlimited: h gets ceil(10/4) = 3. Limited: h +1 (4 units), l +6.
	out := GreedyByScore{Budget: decision.Free{"H100": 3, "L4": 100}}.Optimize([]Request{r})[0]
	assert.Equal(t, map[string]int32{"h": 2, "l": 7}, targetsOf(out))
	byName := map[string]decision.Target{}
	for _, t := range out {
		byName[t.Variant] = t
	}
	assert.Contains(t, byName["h"].Reason, "h +3 cut to +1")
	assert.Contains(t, byName["l"].Reason, "l +6 instead, GPU budget exhausted for h (H100)")
	assert.Equal(t, decision.ActionScaleUp, byName["l"].Action)
}

func TestGreedyPassesThrough(t *testing.T) {
	vs := []v{gpuVariant("x", "H100", 1, 3, 10, 1)}
	reqs := []Request{
		{Group: decision.Group{ModelID: "down", Variants: vs}, Signal: decision.Signal{SpareCapacity: 1, Reason: "spare"}},
		{Group: decision.Group{ModelID: "hold", Variants: vs}, Signal: decision.Signal{Hold: true, HeldTargets: map[string]int32{"x": 4}, Reason: "transition"}},
		req("up", 1, 1, vs...),
	}
	out := GreedyByScore{Budget: decision.Free{"H100": 0}}.Optimize(reqs)
	assert.Equal(t, OptimizeGroup(reqs[0].Group, reqs[0].Signal), out[0])
	assert.Equal(t, OptimizeGroup(reqs[1].Group, reqs[1].Signal), out[1])
	assert.Equal(t, map[string]int32{"x": 3}, targetsOf(out[2]), "no GPU left: nothing added")
	assert.Contains(t, out[2][0].Reason, "granted nothing where unlimited would add +1 x")
}

// randomRequests builds groups over three accelerators (one unlimited).
func randomRequests(rng *rand.Rand, n int) []Request {
	accs := []string{"H100", "A100", "L4", "unlisted"}
	reqs := make([]Request, n)
	for i := range reqs {
		var vs []v
		caps := map[string]float64{}
		for k := range 1 + rng.IntN(3) {
			name := fmt.Sprintf("g%d-v%d", i, k)
			cur := rng.Int32N(4) + 1
			vs = append(vs, v{Name: name, Accelerator: accs[rng.IntN(len(accs))], GPUsPerReplica: rng.Int32N(4), Cost: 1 + 10*rng.Float64(),
				MinReplicas: 1, MaxReplicas: cur + rng.Int32N(8), CurrentReplicas: cur, PendingReplicas: rng.Int32N(5) / 4})
			caps[name] = 1 + float64(rng.IntN(5))
		}
		sig := decision.Signal{Priority: 0.5 + 2*rng.Float64(), CapacityPerReplica: caps, Reason: "random"}
		if rng.IntN(2) == 0 {
			// Half the groups rank by a useful capacity unrelated to caps.
			sig.UsefulCapacityPerReplica = map[string]float64{}
			for _, x := range vs {
				sig.UsefulCapacityPerReplica[x.Name] = 1 + 10*rng.Float64()
			}
		}
		switch rng.IntN(4) {
		case 0:
			sig.SpareCapacity = 5 * rng.Float64()
		case 1:
			// The slo-planner's form: an exact mix that only adds, and the
			// capacity it adds.
			sig.PlannedReplicas = map[string]int32{}
			for _, x := range vs {
				n := min(x.CurrentReplicas+rng.Int32N(4), x.MaxReplicas)
				sig.PlannedReplicas[x.Name] = n
				sig.RequiredCapacity += float64(n-x.CurrentReplicas) * caps[x.Name]
			}
		default:
			sig.RequiredCapacity = 20 * rng.Float64()
		}
		reqs[i] = Request{Group: decision.Group{ModelID: fmt.Sprintf("m%d", i), Namespace: "ns", Variants: vs}, Signal: sig}
	}
	return reqs
}

// Properties: the limiter never spends more GPUs than the budget holds;
// with a budget large enough it decides exactly as the cost-aware mode.
func TestGreedyProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for trial := range 300 {
		reqs := randomRequests(rng, 1+rng.IntN(12))
		free := decision.Free{"H100": rng.Int64N(12), "A100": rng.Int64N(6), "L4": rng.Int64N(20)}
		out := GreedyByScore{Budget: free}.Optimize(reqs)
		require.Len(t, out, len(reqs))
		spent := map[string]int64{}
		for i, r := range reqs {
			for acc, n := range decision.AddedGPUs(r.Group, out[i]) {
				spent[acc] += n
			}
			for _, tg := range out[i] {
				vv, _ := r.Group.Variant(tg.Variant)
				require.GreaterOrEqual(t, tg.Replicas, vv.MinReplicas)
				require.LessOrEqual(t, tg.Replicas, vv.MaxReplicas)
			}
		}
		for acc, n := range free {
			require.LessOrEqual(t, spent[acc], n, "trial %d: %s over budget", trial, acc)
		}
		// Ample budget: identical to cost-aware.
		ample := decision.Free{"H100": 1 << 30, "A100": 1 << 30, "L4": 1 << 30}
		assert.Equal(t, CostAware{}.Optimize(reqs), GreedyByScore{Budget: ample}.Optimize(reqs), "trial %d", trial)
	}
}

// BenchmarkGreedy1000Groups: 1,000 groups of up to three variants, most
// asking for more capacity than a tight budget holds.
func BenchmarkGreedy1000Groups(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	reqs := randomRequests(rng, 1000)
	free := decision.Free{"H100": 400, "A100": 200, "L4": 800}
	for b.Loop() {
		GreedyByScore{Budget: free}.Optimize(reqs)
	}
}
