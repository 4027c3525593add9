// Package planner implements the slo-planner analyzer: it sizes a variant
// group for its latency SLO over the time new replicas take to start.
//
//   - Demand is what arrives at the gateway (the endpoint picker's request
//     counter), not what the pods are given, plus the backlog held at the
//     gateway and in the servers, drained over one start-up delay
//     (demand.go).
//   - Capacity is each variant's request rate per replica at the SLO
//     (capacity.go), learned online from the replicas' ITL at their
//     concurrency, with a prior from the engine args and KV geometry
//     (learn.go). A variant never seen serving is tried at a discount
//     and credited a fair price until its replicas prove their rate
//     (trial.go).
//   - When more than half of the replicas reporting metrics are saturated
//     (KV cache, queue, or requests over the ITL target), the demand they
//     prove is a floor under the plan, whatever the rate series say
//     (floor.go).
//   - Demand rising steadily is forecast over the start-up delay: a
//     replica ordered now serves at the end of it (trend.go).
//   - A rise the group's past days held at this time of day is ordered
//     one start-up delay before it comes (profile.go).
//   - The plan covers that demand with a square-root safety margin for the
//     SLO's attainment, holds the highest arrival plan of the last
//     holdFactor start-up delays (each at least a metrics window; longer
//     once demand came back over capacity given back within it) once a
//     burst has come back within that time (a lull shorter than that costs
//     less to ride out than the start-up the next burst would need; a
//     drained backlog does not come back, so it is not held) and of
//     shortHoldFactor before while the SLO's error budget holds and the
//     group has minRiseHistory of rises (a one-off rise, such as a spike,
//     is not paid for through the rest of the hour; budget.go, hold.go).
//     A shortfall orders the exact cheapest integer mix of variants that
//     covers the present plan, and a scale-down the one that keeps the
//     held plan covered. A shortfall within smallShortfall of the supply
//     orders only once it has lasted a metrics window: one window's noise
//     in the arrivals or the request shape passes before the replica it
//     would order starts (order.go).
//   - A steady fleet moves to a cheaper mix that covers the held plan,
//     make-before-break, when the saving repays the start-up (swap.go).
//
// The analyzer is a pure function of the group, the configuration and its
// previous State.
package planner

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/wva-project/wva/pkg/analyzer"
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

// Name is the analyzer's name in configuration and decision reasons.
const Name = params.AnalyzerSLOPlanner

const (
	// holdFactor start-up delays (lullUnit) is how long the plan keeps
	// its peak at first; minHoldFactor and maxHoldFactor bound its
	// adaptation.
	holdFactor    = 12
	minHoldFactor = 12
	maxHoldFactor = 32
	// maxHistory bounds the remembered plans; minPersistedPlans are kept
	// before the profile's days are shed (TrimOldest).
	maxHistory        = 1024
	minPersistedPlans = 256
	// Request shape assumed before any replica reported one.
	defaultInputTokens  = 512
	defaultOutputTokens = 256
)

// Why names what set the number.
const (
	WhyDemand  = "demand"
	WhyBacklog = "backlog"
	WhyHorizon = "horizon-hold"
	WhyMax     = "max-replicas"
	WhyFloor   = "floor"
	WhyTrend   = "trend"
	WhyProfile = "daily-profile"
	WhyPersist = "short-wait"
	WhyBudget  = "short-within-budget"
	WhySwap    = "cheaper-mix"
	WhySat     = "saturated"
	WhyCancel  = "cancel"
)

// State is what the planner remembers about a group between cycles.
type State struct {
	Analyzer string                  `json:"analyzer"`
	Variants map[string]VariantState `json:"variants,omitempty"`
	// Plans are the recent planned rates (newest last), for the hold.
	Plans []PlanPoint `json:"plans,omitempty"`
	// HoldFactor is the current hold in lullUnits: it doubles when
	// demand comes back above capacity given back within the hold (a lull
	// too short to pay for a start-up), and shrinks slowly while scale-downs
	// prove right, within [minHoldFactor, maxHoldFactor].
	HoldFactor float64 `json:"holdFactor,omitempty"`
	// FoundAt and Found are the first cycle and the replicas found then:
	// the fleet as found is kept for a hold, since nothing is known yet of
	// the lulls it has to ride out.
	FoundAt time.Time        `json:"foundAt,omitempty"`
	Found   map[string]int32 `json:"found,omitempty"`
	// LastRelease is when capacity was last given back.
	LastRelease time.Time `json:"lastRelease,omitempty"`
	// Short says the last cycle's supply fell short of its staffed
	// demand (the attainment feedback leaves overloads to the plan then).
	Short bool `json:"short,omitempty"`
	// SwapAt and SwapTo are the last move to a cheaper mix and the mix
	// it moves to; releasing down to SwapTo completes it and gives back
	// no capacity the plan needs, so it is not a release.
	SwapAt time.Time        `json:"swapAt,omitempty"`
	SwapTo map[string]int32 `json:"swapTo,omitempty"`
	// ShortSince is when a small shortfall began (zero when there is
	// none), kept through a cycle at the plan (carryShortfall).
	ShortSince time.Time `json:"shortSince,omitempty"`
	// Rises are the onsets of bursts seen recently (newest last).
	Rises []time.Time `json:"rises,omitempty"`
	// Input and Output are the last known mean request shape.
	Input  float64 `json:"inputTokens,omitempty"`
	Output float64 `json:"outputTokens,omitempty"`
	// Roles is each role's memory in a disaggregated group (roles.go).
	Roles map[decision.Role]State `json:"roles,omitempty"`
	// RiseHistory is the rises seen within a start-up delay, for the
	// rise margin (risemargin.go).
	RiseHistory RiseHistory `json:"riseHistory,omitempty"`
	// Profile is the group's arrivals by time of day (profile.go).
	Profile Profile `json:"profile,omitzero"`
	// Budget is the SLO's error budget spent lately (budget.go).
	Budget Budget `json:"budget,omitzero"`
	// HoldsTheRest is the variant last kept for the requests the others
	// miss the TTFT target on (fits.go).
	HoldsTheRest string `json:"holdsTheRest,omitempty"`
	// Backlog and BacklogAt are the last cycle's backlog, for its growth.
	Backlog   float64   `json:"backlog,omitempty"`
	BacklogAt time.Time `json:"backlogAt,omitzero"`
	// DrainedAt is when a backlog was last drained (drained).
	DrainedAt time.Time `json:"drainedAt,omitzero"`
	// UnheldOrderAt is when replicas were last ordered for a saturation
	// floor or a backlog, which the hold does not keep (cancel).
	UnheldOrderAt time.Time `json:"unheldOrderAt,omitzero"`
}

// VariantState is one variant's learned capacity; kept while the variant
// is at zero replicas.
type VariantState struct {
	Fit      Fit     `json:"fit"`
	KVTokens float64 `json:"kvTokens,omitempty"`
	// PromptRate is the fastest its replicas were seen computing prompts
	// lately (promptRate; each reading fades by forget), in tokens per
	// second: the prompts' prior.
	PromptRate float64 `json:"promptRate,omitempty"`
	// LastReady and Settle skip observations for settleCycles after the
	// variant gained ready replicas: a new pod's 1m rates under-read its
	// load for its first window, which would bend the line up.
	LastReady int32 `json:"lastReady"`
	Settle    int   `json:"settle,omitempty"`
	// Seen is set once the variant has been analyzed: the replicas found
	// on the first cycle are not new.
	Seen bool `json:"seen,omitempty"`
	// PeakLoad is the highest request rate one of its replicas was seen
	// serving (requests per second).
	PeakLoad float64 `json:"peakLoad,omitempty"`
	// ShownLoad is the highest mean load per replica (prompt and output
	// tokens per second) at which its requests met the ITL target.
	ShownLoad float64 `json:"shownLoad,omitempty"`
	// Headroom is the share of the ITL target the plan holds the mean
	// ITL to, learned from the requests over the target (attainment.go);
	// 0 until the variant is first analyzed.
	Headroom float64 `json:"itlHeadroom,omitempty"`
	// TPOTPool is the requests pooled towards the next headroom verdict.
	TPOTPool Pool `json:"tpotPool,omitempty"`
	// VerdictAt is when the headroom was last judged: the rate window
	// then still holds the requests that verdict counted.
	VerdictAt time.Time `json:"verdictAt,omitzero"`
	// TTFTPool is the requests over the TTFT target, pooled with decay
	// (fits.go).
	TTFTPool Pool `json:"ttftPool,omitzero"`
	// StartupDelay is the last start-up delay measured for the variant,
	// kept while it has no Ready pod to measure it from.
	StartupDelay time.Duration `json:"startupDelay,omitempty"`
	// Weight is the gateway's load on one of its replicas relative to the
	// other variants' (share.go); 0 until seen serving beside another.
	Weight float64 `json:"gatewayWeight,omitempty"`
	// ITLOver is the share of its requests over the ITL target in the
	// last rate window that counted minOverSLORequests, at ITLOverAt.
	ITLOver   float64   `json:"itlOver,omitempty"`
	ITLOverAt time.Time `json:"itlOverAt,omitzero"`
}

// settleCycles is how many cycles a variant's observations are skipped
// after it gained ready replicas (one metrics window and a scrape).
const settleCycles = 3

// PlanPoint is one cycle's planned rate.
type PlanPoint struct {
	At   time.Time `json:"at"`
	Rate float64   `json:"rate"`
	// Arrivals is the arrival rate seen then, for the trend.
	Arrivals float64 `json:"arrivals,omitempty"`
	// Forecast is the plan with the trend's growth over two start-ups,
	// when arrivals rose along a line then (0 otherwise), held for one
	// start-up.
	Forecast float64 `json:"forecast,omitempty"`
	// SlowFloor is the saturation floor set by replicas over the ITL
	// target then, when the rates did not explain it (0 otherwise), held
	// for a short hold.
	SlowFloor float64 `json:"slowFloor,omitempty"`
	// Level is the group's level then (levelOf): the plan is held as a
	// multiple of it.
	Level float64 `json:"level,omitempty"`
}

// VariantAnalysis is one variant's intermediate quantities.
type VariantAnalysis struct {
	Name         string          `json:"name"`
	Current      int32           `json:"current"`
	Ready        int32           `json:"ready"`
	Curve        Curve           `json:"itlCurve"`
	Observations int             `json:"observations"`
	Limits       Limits          `json:"limits"`
	Capacity     ReplicaCapacity `json:"capacity"`
	StartupDelay string          `json:"startupDelay"`
	Planned      int32           `json:"planned"`
	PeakLoad     float64         `json:"peakLoad"`
	// Headroom is the ITL headroom planned with; TPOTOverTarget the share
	// of the variant's requests over the ITL target in the rate window.
	Headroom       float64 `json:"itlHeadroom"`
	TPOTOverTarget float64 `json:"tpotOverTarget"`
	// TTFTMisses is the pooled share of its requests over the TTFT
	// target (0 until enough are pooled).
	TTFTMisses float64 `json:"ttftMisses,omitempty"`
	// Load is its load factor under the gateway's split (share.go): 1
	// while no weight is learned.
	Load float64 `json:"gatewayLoad,omitempty"`
}

// Analysis is the planner's intermediate quantities for a group.
type Analysis struct {
	ArrivalRate   float64 `json:"arrivalRate"`
	ArrivalSource string  `json:"arrivalSource"`
	// LoadRate is the arrival rate over the last request duration (at
	// most the horizon): the rate the requests in flight arrived at.
	LoadRate    float64 `json:"loadRate"`
	Backlog     float64 `json:"backlog"`
	BacklogRate float64 `json:"backlogRate"`
	// BacklogGrowth is how fast the backlog grew since the last cycle
	// (req/s), ordered with it.
	BacklogGrowth float64 `json:"backlogGrowth,omitempty"`
	// HoldsTheRest is the variant kept at one replica at least for the
	// requests the others miss the TTFT target on (fits.go).
	HoldsTheRest string `json:"holdsTheRest,omitempty"`
	// MissingITL are the variants a scale-down or a move to a cheaper
	// mix gave back first and added none of: their requests miss the ITL
	// target while another variant's meet it (shiftFromMissingITL).
	MissingITL []string `json:"missingITL,omitempty"`
	// MissingTTFT are the variants the mix adds none of while the plan
	// keeps HoldsTheRest: their requests miss the TTFT target clearly
	// more than its (missingTTFT).
	MissingTTFT []string `json:"missingTTFT,omitempty"`
	// BacklogLeft is the backlog projected to when a replica ordered now
	// serves: what the replicas already starting leave (projectedBacklog).
	BacklogLeft float64 `json:"backlogLeft,omitempty"`
	// Rising is the growth forecast over the horizon (req/s).
	Rising float64 `json:"rising"`
	// RiseMargin is the rise the group's history says can come within
	// the horizon (req/s), planned for when the trend forecasts less.
	RiseMargin float64 `json:"riseMargin"`
	// ProfileRise is the rise the daily profile says begins within the
	// horizon (req/s).
	ProfileRise float64 `json:"profileRise,omitempty"`
	Horizon     string  `json:"horizon"`
	// Staffed is demand plus the margin for the attainment target.
	Staffed float64 `json:"staffedRate"`
	// StaffedArrivals is Staffed without the backlog: what the hold
	// remembers of this cycle.
	StaffedArrivals float64 `json:"staffedArrivals"`
	// Saturated is how many replicas set the saturation floor (0 when
	// the rates set the demand), Slow how many of them are over the ITL
	// target, and Floor the demand they prove (req/s, before the margin).
	Saturated int     `json:"saturatedReplicas,omitempty"`
	Slow      int     `json:"slowReplicas,omitempty"`
	Floor     float64 `json:"saturationFloor,omitempty"`
	// SlowFloor is the staffed floor when most replicas are over the ITL
	// target and the rates do not explain it (held for a short hold), 0
	// otherwise.
	SlowFloor float64 `json:"slowFloor,omitempty"`
	Reporting int     `json:"reportingReplicas,omitempty"`
	// Held is the highest staffed rate over the hold, each scaled to
	// the level now (Level; 0 while unknown).
	Held       float64 `json:"heldRate"`
	Level      float64 `json:"level,omitempty"`
	Hold       string  `json:"hold"`
	Supply     float64 `json:"supply"`
	PlanSupply float64 `json:"plannedSupply"`
	Input      float64 `json:"inputTokens"`
	Output     float64 `json:"outputTokens"`
	Why        string  `json:"why"`
	// Trying names the variants never seen running that this order adds
	// replicas of (untriedPriceShare).
	Trying   []string          `json:"trying,omitempty"`
	Variants []VariantAnalysis `json:"variants"`
	// BudgetSpent says the requests over the ITL target lately exceed
	// the SLO's error budget (budget.go): every rise is held for the
	// full hold.
	BudgetSpent bool `json:"budgetSpent,omitempty"`
}

// Rates implements analyzer.RateReporter: the required rate is the held
// plan (demand, backlog, margins and the hold's peak).
func (a Analysis) Rates() analyzer.Rates {
	r := analyzer.Rates{Arrivals: a.ArrivalRate, Required: a.Held, Supply: a.Supply, PerReplica: make(map[string]float64, len(a.Variants))}
	for _, v := range a.Variants {
		r.PerReplica[v.Name] = v.Capacity.Rate
	}
	return r
}

// Summary implements analyzer.Summarizer.
func (a Analysis) Summary() []string {
	lines := []string{
		fmt.Sprintf("demand %.3f req/s (%s; %.3f over a request's duration) + rising %.3f (history's rise margin %.3f, daily profile's rise %.3f) + backlog %.0f (growing %.3f req/s; %.0f left when what is ordered now serves) over %s = %.3f req/s%s; with margin %.3f; held %.3f over %s%s",
			a.ArrivalRate, a.ArrivalSource, a.LoadRate, a.Rising, a.RiseMargin, a.ProfileRise, a.Backlog, a.BacklogGrowth, a.BacklogLeft, a.Horizon, a.LoadRate+max(a.Rising, a.RiseMargin, a.ProfileRise)+a.BacklogRate, floorNote(a), a.Staffed, a.Held, a.Hold, levelNote(a.Level)+budgetNote(a.BudgetSpent)),
		fmt.Sprintf("supply %.3f req/s -> planned %.3f req/s (%s); request I %.0f O %.0f tokens", a.Supply, a.PlanSupply, a.Why, a.Input, a.Output),
	}
	for _, v := range a.Variants {
		lines = append(lines, fmt.Sprintf("  variant %s: %d replicas (%d ready) -> %d; %.3f req/s per replica (bound %s, concurrency %.1f, ITL %.1f ms at headroom %.3f, %.1f%% of requests over the ITL target, %.1f%% over the TTFT target; 1/ITL = %.4g - %.4g*x1 - %.4g*x2 from %d observations); gateway load x%.2f; start-up %s",
			v.Name, v.Current, v.Ready, v.Planned, v.Capacity.Rate, v.Capacity.Bound, v.Capacity.Concurrency, v.Capacity.ITLms, v.Headroom, 100*v.TPOTOverTarget, 100*v.TTFTMisses, v.Curve.P, v.Curve.C1, v.Curve.C2, v.Observations, v.Load, v.StartupDelay))
	}
	if len(a.MissingITL) > 0 {
		lines = append(lines, fmt.Sprintf("  giving back %s first and adding none: another variant's requests meet the target", strings.Join(a.MissingITL, ", ")))
	}
	if a.HoldsTheRest != "" {
		lines = append(lines, fmt.Sprintf("  keeping a replica of %s at least: the running variants miss the TTFT target on more requests than its part of the error budget, and it misses fewer", a.HoldsTheRest))
		if len(a.MissingTTFT) > 0 {
			lines = append(lines, fmt.Sprintf("  adding no replicas of %s: their requests miss the TTFT target clearly more than %s's", strings.Join(a.MissingTTFT, ", "), a.HoldsTheRest))
		}
	}
	return lines
}

// floorNote says what the saturation floor set, when it set the plan in
// place of the rates: the staffed figure that follows is the floor's.
func floorNote(a Analysis) string {
	if a.Saturated == 0 {
		return ""
	}
	held := "not held"
	if a.SlowFloor > 0 {
		held = "held for a short hold"
	}
	return fmt.Sprintf(", under the saturation floor %.3f req/s (%d of %d reporting replicas saturated, %d over the ITL target; %s)", a.Floor, a.Saturated, a.Reporting, a.Slow, held)
}

// Analyzer is the slo-planner.
type Analyzer struct{}

// Name implements analyzer.Analyzer.
func (Analyzer) Name() string { return Name }

// Analyze implements analyzer.Analyzer (no memory of earlier cycles).
func (a Analyzer) Analyze(g decision.Group, cfg params.Resolved) (analyzer.Result, error) {
	return a.AnalyzeState(g, cfg, nil)
}

// AnalyzeState implements analyzer.Stateful. The signal is in requests per
// second and carries the planned mix (Signal.PlannedReplicas).
func (Analyzer) AnalyzeState(g decision.Group, cfg params.Resolved, prev any) (analyzer.Result, error) {
	st, ok := analyzer.DecodeState[State](prev)
	if !ok || st.Analyzer != Name {
		st = State{}
	}
	if parts := g.ByRole(); len(parts) > 1 {
		return planRoles(g, parts, cfg, st), nil
	}
	slo := cfg.SLO
	if slo.TargetITLms <= 0 || slo.TargetTTFTms <= 0 {
		slo = params.DefaultSLO()
	}
	next := State{Analyzer: Name, Variants: map[string]VariantState{}, Input: st.Input, Output: st.Output,
		HoldFactor: st.HoldFactor, LastRelease: st.LastRelease, FoundAt: st.FoundAt, Found: st.Found,
		SwapAt: st.SwapAt, SwapTo: st.SwapTo, UnheldOrderAt: st.UnheldOrderAt}
	if next.Found == nil {
		next.FoundAt, next.Found = g.Now, map[string]int32{}
		for _, v := range g.Variants {
			next.Found[v.Name] = v.CurrentReplicas
		}
	}
	an, sig := plan(g, slo, cfg.Scaling, st, &next)
	return analyzer.Result{Signal: sig, Details: an, State: next}, nil
}

// cycle is one planning cycle: its inputs, and what each step derives for
// the next.
type cycle struct {
	g       decision.Group
	slo     params.SLO
	scaling params.Scaling
	st      State
	next    *State
	an      Analysis
	// variants are the group's, by name.
	variants []decision.Variant
	// caps is each variant's rate per replica at the SLO.
	caps map[string]ReplicaCapacity
	// loads is each variant's load factor under the gateway's split
	// (share.go), in variants' order.
	loads []float64
	// horizon is the start-up delay the plan looks ahead by; ref the
	// capacity the margin is mostly made of.
	horizon time.Duration
	ref     ReplicaCapacity
	// short says the supply does not cover the staffed demand.
	short bool
	// saturated says most reporting replicas are saturated (demand set
	// by the saturation floor): the shortfall is evidence, not noise.
	saturated bool
	// window is the replicas' histograms over the rate window, merged
	// once per cycle for every count of their misses (the group's share
	// over target in capacities, the error budget in holdPeak,
	// budgetCoversShortfall in mix).
	window window
	// hold is how long the plan keeps its peak.
	hold time.Duration
	// trend is the arrivals' line over the trend's window.
	trend trend
	// missingTTFT are the variants the mix adds none of: their requests
	// miss the TTFT target clearly more than HoldsTheRest's (fits.go).
	missingTTFT []int
	// current is each variant's replicas now (in variants' order).
	current []int32
}

// plan sizes the group: what a replica of each variant serves, the demand
// to serve, the peak to hold through lulls, and the cheapest mix for them.
func plan(g decision.Group, slo params.SLO, scaling params.Scaling, st State, next *State) (Analysis, decision.Signal) {
	c := &cycle{g: g, slo: slo, scaling: scaling, st: st, next: next, window: mergeWindow(g.Replicas)}
	c.an.Input, c.an.Output = requestShape(g, st)
	next.Input, next.Output = c.an.Input, c.an.Output
	c.variants = append([]decision.Variant(nil), g.Variants...)
	sort.Slice(c.variants, func(i, j int) bool { return c.variants[i].Name < c.variants[j].Name })

	c.capacities()
	if i := holdsTheRest(c.variants, c.next.Variants, slo, st.HoldsTheRest); i >= 0 {
		// The requests the running variants cannot hold within the TTFT
		// target need a replica of one that can (fits.go).
		v := &c.variants[i]
		v.MinReplicas = min(max(v.MinReplicas, 1), v.MaxReplicas)
		c.an.HoldsTheRest, next.HoldsTheRest = v.Name, v.Name
		c.missingTTFT = missingTTFT(c.variants, c.next.Variants, v.Name)
		for _, j := range c.missingTTFT {
			c.an.MissingTTFT = append(c.an.MissingTTFT, c.variants[j].Name)
		}
	}
	c.demand()
	c.holdPeak()
	counts := c.mix()
	return c.an, c.signal(counts, scaling.Priority)
}

// capacities learns each variant's rate per replica at the SLO.
func (c *cycle) capacities() {
	c.caps = make(map[string]ReplicaCapacity, len(c.variants))
	starting := c.replicasStarting()
	groupOver := c.window.over(c.slo.TargetITLms, c.slo.TargetTTFTms)
	for _, v := range c.variants {
		vs := c.st.Variants[v.Name]
		// While replicas start, the ready ones also carry the load
		// planned for them: the group counts as short for what they
		// show. Pods stuck Pending are not starting: they would keep
		// the feedback off for as long as they are stuck.
		va, nvs := learn(v, c.g.Replicas, vs, c.slo, c.an.Input, c.an.Output, groupOver, c.st.Short || starting, c.g.Now)
		if v.Role.Normalized() == decision.RolePrefill {
			va.Capacity = prefillCapacity(v, c.g.Replicas, c.slo, c.an.Input)
		}
		c.next.Variants[v.Name] = nvs
		c.caps[v.Name] = va.Capacity
		c.an.Variants = append(c.an.Variants, va)
	}
	fairPrice(c.variants, c.caps, c.an.Variants)
	observeShares(c.variants, c.g.Replicas, c.next.Variants, c.g.Now)
	c.loads = loadFactors(c.variants, c.caps, c.next.Variants)
	for i := range c.an.Variants {
		c.an.Variants[i].Load = c.loads[i]
	}
}

// signal is the plan as a signal: the mix, each variant's rate per
// replica, and the rate it adds or gives back.
func (c *cycle) signal(counts []int32, priority float64) decision.Signal {
	an := &c.an
	sig := decision.Signal{Analyzer: Name, Priority: priority, CapacityPerReplica: map[string]float64{},
		PlannedReplicas: map[string]int32{}}
	an.PlanSupply = c.supplyOf(counts)
	for i, v := range c.variants {
		an.Variants[i].Planned = counts[i]
		sig.PlannedReplicas[v.Name] = counts[i]
		sig.CapacityPerReplica[v.Name] = c.caps[v.Name].Rate
	}
	if an.PlanSupply > an.Supply {
		sig.RequiredCapacity = an.PlanSupply - an.Supply
	} else {
		sig.SpareCapacity = an.Supply - an.PlanSupply
	}
	sig.Reason = reason(*an, c.variants, counts)
	return sig
}

func reason(an Analysis, variants []decision.Variant, counts []int32) string {
	parts := make([]string, len(variants))
	for i, v := range variants {
		parts[i] = fmt.Sprintf("%s %d", v.Name, counts[i])
	}
	var why string
	switch an.Why {
	case WhyHorizon:
		why = fmt.Sprintf("holding the highest plan of the last %s (%.2f req/s): capacity given back must not be needed again within it", an.Hold, an.Held)
	case WhyBacklog:
		why = fmt.Sprintf("backlog of %.0f requests to drain within %s", an.Backlog, an.Horizon)
	case WhyMax:
		why = "demand exceeds every variant at maxReplicas"
	case WhyTrend:
		why = fmt.Sprintf("demand rising %.2f req/s within %s", an.Rising, an.Horizon)
	case WhyProfile:
		why = fmt.Sprintf("the past days rose by %.2f req/s within %s of this time of day", an.ProfileRise, an.Horizon)
	case WhySwap:
		why = fmt.Sprintf("moving to a cheaper mix covering %.2f req/s: its replicas start first, the others are released once they serve", an.Held)
	case WhySat:
		why = fmt.Sprintf("%d of %d reporting replicas saturated: demand exceeds their supply whatever the rates say", an.Saturated, an.Reporting)
	case WhyCancel:
		why = fmt.Sprintf("the saturation or backlog replicas were ordered for is gone: giving back those still starting beyond the held plan (%.2f req/s)", an.Held)
	case WhyPersist:
		why = fmt.Sprintf("short by less than %.0f%% for under %s; waiting one metrics window", smallShortfall*100, persistFor)
	case WhyBudget:
		why = fmt.Sprintf("short by less than %.0f%%, which the error budget covers at the last %s's misses until a replica ordered now would serve", smallShortfall*100, decision.RateWindow)
	default:
		why = "sized for demand"
	}
	// What set the number first, then the figures it came from, so the
	// reason alone explains the decision in `kubectl get va`.
	if len(an.Trying) > 0 {
		why += fmt.Sprintf(", trying %s (never seen running, priced at %.0f%% of its cost)", strings.Join(an.Trying, " and "), untriedPriceShare*100)
	}
	return fmt.Sprintf("slo-planner: %s; demand %.2f req/s (%s), backlog %.0f; plan %.2f req/s with margin, held %.2f, supply %.2f -> %s",
		why, an.ArrivalRate, an.ArrivalSource, an.Backlog, an.Staffed, an.Held, an.Supply, strings.Join(parts, ", "))
}

// TrimOldest implements analyzer.Trimmer: it drops the older half of the
// plans (the newest ones carry the hold), for persisting under a size
// bound; at minPersistedPlans or fewer, the profile's oldest day first.
func (s State) TrimOldest() (any, bool) {
	if len(s.Roles) > 0 {
		return s.trimRoles()
	}
	if len(s.Plans) <= minPersistedPlans {
		// The hold's plans are worth more than the profile's oldest day.
		if p, ok := s.Profile.trimOldestDay(); ok {
			s.Profile = p
			return s, true
		}
	}
	if len(s.Plans) == 0 {
		return s, false
	}
	s.Plans = append([]PlanPoint(nil), s.Plans[len(s.Plans)/2+len(s.Plans)%2:]...)
	return s, true
}
