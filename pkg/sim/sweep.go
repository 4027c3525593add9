package sim

import (
	"fmt"
	"math"
	"sort"

	"github.com/wva-project/wva/pkg/sim/oracle"
	"github.com/wva-project/wva/pkg/sim/policies"
	"github.com/wva-project/wva/pkg/sim/scenario"
	"github.com/wva-project/wva/pkg/sim/trace"
)

// Attainment levels a frontier reports the cost of.
const (
	FrontierLow  = 0.95
	FrontierHigh = 0.99
)

// Frontier is one policy's cost against attainment as its one knob moves:
// the cheapest run reaching each level, nil where no run did.
type Frontier struct {
	Knob     string          `json:"knob"`
	Points   []FrontierPoint `json:"points"`
	CostAt95 *float64        `json:"costAt95"`
	CostAt99 *float64        `json:"costAt99"`
}

// FrontierPoint is one run of the sweep.
type FrontierPoint struct {
	Knob       float64 `json:"knob"`
	Cost       float64 `json:"cost"`
	Attainment float64 `json:"attainment"`
}

// StaticKnob names the constant fleets' frontier (swept by size).
const StaticKnob = "constant fleet"

// knobSweep is how one policy's knob is set on a scenario.
type knobSweep struct {
	knob   string
	values []float64
	set    func(sc *scenario.Scenario, v float64) error
}

// sweeps are the knobs --frontier moves: wva's attainment target (its one
// knob), the KV threshold of the reference analyzers, the queue-threshold
// and KPA targets as multiples of the scenario's. Constant fleets are
// swept by size by the static-frontier rows themselves.
func sweeps(base scenario.Scenario) map[string]knobSweep {
	// wva-throughput embeds wva-v1's policy: both read policies.v1.
	kvThreshold := knobSweep{"kvCacheThreshold", []float64{0.4, 0.5, 0.6, 0.7, 0.8, 0.9}, func(sc *scenario.Scenario, v float64) error {
		sc.Policies.V1.KvCacheThreshold = v
		return nil
	}}
	return map[string]knobSweep{
		policies.PolicyWVA:           {"sloAttainment", []float64{0.9, 0.95, 0.98, 0.99, 0.995, 0.999}, setWVAAttainment},
		policies.PolicyWVAV1:         kvThreshold,
		policies.PolicyWVAThroughput: kvThreshold,
		policies.PolicyQueueThreshold: {"targetWaitingPerReplica (x scenario)", []float64{0.125, 0.25, 0.5, 1, 2, 4}, func(sc *scenario.Scenario, v float64) error {
			sc.Policies.QueueThreshold.TargetWaitingPerReplica = base.Policies.QueueThreshold.TargetWaitingPerReplica * v
			return nil
		}},
		policies.PolicyKPA: {"targetUtilization", []float64{0.2, 0.35, 0.5, 0.7, 0.85, 1}, func(sc *scenario.Scenario, v float64) error {
			sc.Policies.KPA.TargetUtilization = v
			return nil
		}},
	}
}

// setWVAAttainment sets the attainment wva plans for, over its
// configuration's; the yardstick (slo.attainment) stays.
func setWVAAttainment(sc *scenario.Scenario, v float64) error {
	sc.Policies.WVA.SetAttainment(v)
	return nil
}

// SweepFrontiers fills each swept policy's Frontier in rep: one run of the
// policy alone per knob value, on the same trace. The constant fleets'
// frontier is read from the report's static rows (static-peak and the
// static-frontier rows) and attached to static-peak's row, or to the first
// static-frontier row without static-peak.
func SweepFrontiers(sc scenario.Scenario, trace trace.Trace, rep *Report) error {
	sw := sweeps(sc)
	for i := range rep.Policies {
		p := &rep.Policies[i]
		s, ok := sw[p.Policy]
		if !ok {
			continue
		}
		f := &Frontier{Knob: s.knob}
		for _, v := range s.values {
			run := sc
			if err := s.set(&run, v); err != nil {
				return fmt.Errorf("--frontier %s %s=%g: %w", p.Policy, s.knob, v, err)
			}
			r, err := Run(run, trace, Options{Policies: []string{p.Policy}})
			if err != nil {
				return fmt.Errorf("--frontier %s %s=%g: %w", p.Policy, s.knob, v, err)
			}
			f.Points = append(f.Points, FrontierPoint{Knob: v, Cost: r.Policies[0].Cost, Attainment: r.Policies[0].SLOAttainment})
		}
		f.Fill()
		p.Frontier = f
	}
	var static *Frontier
	owner := -1
	for i, p := range rep.Policies {
		if p.Policy == policies.PolicyStaticPeak || oracle.IsFrontierRow(p.Policy) {
			if static == nil {
				static = &Frontier{Knob: StaticKnob}
			}
			static.Points = append(static.Points, FrontierPoint{Knob: p.MeanReplicas, Cost: p.Cost, Attainment: p.SLOAttainment})
			if owner < 0 || p.Policy == policies.PolicyStaticPeak {
				owner = i
			}
		}
	}
	if static != nil {
		sort.Slice(static.Points, func(i, j int) bool { return static.Points[i].Cost < static.Points[j].Cost })
		static.Fill()
		rep.Policies[owner].Frontier = static
	}
	return nil
}

// Fill sets the cheapest cost reaching each attainment level.
func (f *Frontier) Fill() {
	at := func(level float64) *float64 {
		best := math.Inf(1)
		for _, p := range f.Points {
			if p.Attainment >= level-1e-12 && p.Cost < best {
				best = p.Cost
			}
		}
		if math.IsInf(best, 1) {
			return nil
		}
		return &best
	}
	f.CostAt95, f.CostAt99 = at(FrontierLow), at(FrontierHigh)
}
