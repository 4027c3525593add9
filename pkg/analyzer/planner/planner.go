// Package planner implements the slo-planner analyzer: it sizes a variant
// group for its latency SLO over the time new replicas take to start.
//
//   - Demand is what arrives at the gateway (the endpoint picker's request
//     counter), not what the pods are given, plus the backlog held at the
//     gateway and in the servers, drained over one start-up delay.
//   - Capacity is each variant's request rate per replica at the SLO
//     (capacity.go), learned online from the replicas' ITL at their
//     concurrency, with a prior from the engine args and KV geometry.
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
//     is not paid for through the rest of the hour; budget.go). A
//     shortfall orders the exact cheapest integer mix of variants that
//     covers the present plan, and a scale-down the one that keeps the
//     held plan covered. A shortfall within smallShortfall of the supply
//     orders only once it has lasted a metrics window: one window's noise
//     in the arrivals or the request shape passes before the replica it
//     would order starts.
//   - A steady fleet moves to a cheaper mix that covers the held plan,
//     make-before-break, when the saving repays the start-up (swap.go).
//
// The analyzer is a pure function of the group, the configuration and its
// previous State.
package planner

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/wva-project/wva/pkg/analyzer"
	"github.com/wva-project/wva/pkg/analyzer/saturation"
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
	WhySwap    = "cheaper-mix"
	WhySat     = "saturated"
	WhyCancel  = "cancel"
)

const (
	// smallShortfall is the share of the supply a shortfall must exceed
	// to order at once; a smaller one must last persistFor.
	smallShortfall = 0.1
	// persistFor is one metrics rate window (decision.RateWindow): what a
	// shortfall must outlast to be more than one window's noise.
	persistFor = decision.RateWindow
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
	// TrialFrom is when the variant's replicas began serving without
	// having proven their rate (onTrial); zero once proven or at zero
	// ready replicas.
	TrialFrom time.Time `json:"trialFrom,omitzero"`
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
	// OnTrial says its replicas serve an unproven rate, for under
	// trialLength: a scale-down keeps one of them.
	OnTrial bool `json:"onTrial,omitempty"`
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
	// Trial are the variants a scale-down keeps a replica of while it
	// proves its rate (onTrial).
	Trial []string `json:"trial,omitempty"`
	// BudgetSpent says the requests over the ITL target lately exceed
	// the SLO's error budget (budget.go): every rise is held for the
	// full hold.
	BudgetSpent bool `json:"budgetSpent,omitempty"`
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
	if len(a.Trial) > 0 {
		lines = append(lines, fmt.Sprintf("  keeping a replica of %s on trial: not yet seen serving half the rate credited to it", strings.Join(a.Trial, ", ")))
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
	c := &cycle{g: g, slo: slo, scaling: scaling, st: st, next: next}
	c.an.Input, c.an.Output = requestShape(g, st)
	next.Input, next.Output = c.an.Input, c.an.Output
	c.variants = append([]decision.Variant(nil), g.Variants...)
	sort.Slice(c.variants, func(i, j int) bool { return c.variants[i].Name < c.variants[j].Name })

	c.capacities()
	if i := holdsTheRest(c.variants, c.an.Variants, c.next.Variants, slo, st.HoldsTheRest); i >= 0 {
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
	for _, v := range c.variants {
		vs := c.st.Variants[v.Name]
		// While replicas start, the ready ones also carry the load
		// planned for them: the group counts as short for what they
		// show. Pods stuck Pending are not starting: they would keep
		// the feedback off for as long as they are stuck.
		va, nvs := learn(v, c.g.Replicas, vs, c.slo, c.an.Input, c.an.Output, c.st.Short || starting, c.g.Now)
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

// demand is the rate to serve: arrivals, their rise over the start-up
// delay and the backlog, staffed with the margin for the attainment.
func (c *cycle) demand() {
	an := &c.an
	an.ArrivalRate, an.ArrivalSource = demand(c.g)
	an.Backlog = c.g.SchedulerQueueSize
	for _, r := range c.g.Replicas {
		an.Backlog += r.QueueLength
	}
	c.horizon = startupHorizon(c.variants, c.next.Variants, c.slo)
	an.Horizon = c.horizon.String()
	// The backlog is drained over one start-up delay: a replica ordered for
	// it serves while there is still backlog to serve. The backlog
	// projected to the end of the start-up is not the rate to order for:
	// the replicas already serving drain much of it meanwhile. But a
	// backlog growing now grows as fast until what is ordered serves
	// (arrivals over what the replicas really serve, whatever their
	// fitted capacity says): that growth is ordered too, once, rather
	// than as a top-up each cycle that comes a start-up late.
	// A backlog worth ordering for (as WhyBacklog) is ordered only while
	// it outlasts what is already starting: replicas ordered now serve
	// one start-up later, and when the replicas on their way (ordered
	// for this backlog a cycle or two ago) will have drained it by then,
	// they would serve none of it. At a spike, six L40S ordered that way
	// started two minutes after the backlog was gone. When some is left,
	// every replica ordered shortens the drain, during which each arrival
	// waits past the TTFT target, so the whole backlog and its growth are
	// ordered.
	c.next.Backlog, c.next.BacklogAt, c.next.DrainedAt = an.Backlog, c.g.Now, c.st.DrainedAt
	dt := c.g.Now.Sub(c.st.BacklogAt)
	recent := !c.st.BacklogAt.IsZero() && dt > 0 && dt <= 2*decision.RateWindow
	if recent && an.Backlog > c.st.Backlog {
		an.BacklogGrowth = (an.Backlog - c.st.Backlog) / dt.Seconds()
	}
	an.BacklogRate = an.Backlog/c.horizon.Seconds() + an.BacklogGrowth
	an.BacklogLeft = projectedBacklog(an.Backlog, an.BacklogGrowth, c.starting(), c.horizon)
	if an.BacklogRate > backlogShare*an.ArrivalRate && an.BacklogLeft == 0 {
		an.BacklogRate = 0
	}
	if recent && drained(c.st.Backlog, an.Backlog, an.ArrivalRate, c.horizon) {
		c.next.DrainedAt = c.g.Now
	}
	c.trend = trendOf(c.st.Plans, c.g.Now, an.ArrivalRate, c.horizon)
	an.Rising = c.trend.Rising
	c.ref = referenceCapacity(c.variants, c.caps)
	// Rises are read at the timescale of the load they bring: a burst of
	// arrivals shorter than a request adds less than its height to the
	// requests in flight (a reasoning model's minutes-long answers).
	span := time.Duration(c.ref.RequestSeconds * float64(time.Second))
	c.next.RiseHistory = c.st.RiseHistory.record(c.st.Plans, c.g.Now, an.ArrivalRate, c.horizon, span)
	// So is the rate served: requests that last minutes are in flight at
	// the rate of the minutes they last, not of the last rate window.
	an.LoadRate = loadRate(c.st.Plans, c.g.Now, an.ArrivalRate, min(span, c.horizon))
	// A rise is a share of the rate it rises from, mostly the level: while
	// the error budget holds, a burst's peak is not planned with the
	// history's rises stacked on it again (a burst beyond costs misses the
	// budget pays); once it is spent, every rise is planned from the rate
	// now.
	an.Level = levelOf(c.st.Plans, c.g.Now, an.ArrivalRate)
	spent := c.st.Budget.spent(c.slo.Attainment)
	base := an.LoadRate
	if !spent {
		base = riseBase(c.st.Plans, c.g.Now, an.LoadRate, an.Level, c.horizon)
	}
	an.RiseMargin = base * c.next.RiseHistory.margin(c.slo.Attainment)
	// heldMargin is the part of the margin the hold keeps with the demand.
	heldMargin := an.RiseMargin
	if !c.next.RiseHistory.enough() && len(c.st.Rises) == 0 {
		// Too young for the histogram: the delays it remembers are the
		// only evidence of how fast it rises, enough to plan on (waiting
		// for the budget to be spent would pay for the evidence with
		// misses first), not to hold a fleet through the lull after a
		// peak on (a one-hour trace's fall then costs the peak's fleet).
		// A burst's onset (rises) is the hold's to keep, not a margin to
		// read from one sample.
		an.RiseMargin = an.LoadRate * recentRise(c.st.Plans, c.g.Now, an.ArrivalRate, an.LoadRate, c.horizon, span, c.slo.Attainment)
		heldMargin = 0
	}
	c.next.Profile = c.st.Profile
	if !c.g.Now.IsZero() {
		c.next.Profile = c.st.Profile.record(c.g.Now, an.ArrivalRate)
	}
	// The profile's rise is ordered, not held: a rise that does not come
	// is given back once the profile no longer says it is ahead.
	an.ProfileRise = c.next.Profile.rise(c.g.Now, c.horizon)
	rate := an.LoadRate + max(an.Rising, an.RiseMargin, an.ProfileRise) + an.BacklogRate
	an.Staffed = staffed(rate, c.ref, c.slo)
	an.StaffedArrivals = staffed(an.LoadRate+heldMargin, c.ref, c.slo)
	if floor, n, slow := saturationFloor(c.g, c.caps, c.ref, c.scaling, c.slo, !c.settling()); floor > rate && !c.absorbing() {
		// The replicas say demand is more than the rates do: a renamed
		// counter, a scrape gap or a capacity fitted too high. Like a
		// backlog, the floor orders now and is not held: saturation
		// while a backlog drains is not demand that comes back.
		c.saturated = true
		an.Saturated, an.Slow, an.Reporting, an.Floor = n, slow, len(c.g.Replicas), floor
		byRates := an.Staffed
		an.Staffed = staffed(floor, c.ref, c.slo)
		if slow*2 > len(c.g.Replicas) && byRates < floor-c.ref.Rate {
			// Most replicas are over the ITL target, not just queued,
			// and the rates do not explain it (they ask for less than
			// the floor by more than a replica): their capacity was
			// fitted too high, and what the floor orders is held for a
			// short hold (while the attainment feedback lowers the
			// capacity), not given back the next cycle to be ordered
			// again. Saturation the rates explain (a fleet short of
			// the demand it sees, the replicas it ordered starting) is
			// met by the plan and gone once they serve.
			an.SlowFloor = an.Staffed
		}
	}
}

// settling says a variant gained ready replicas within settleCycles: the
// TPOT histograms of the rate window still hold the requests served
// before those took their share.
func (c *cycle) settling() bool {
	for _, v := range c.variants {
		if c.next.Variants[v.Name].Settle > 0 {
			return true
		}
	}
	return false
}

// drained says a backlog worth ordering for (a tenth of the arrivals
// over a start-up, as WhyBacklog) was at least halved within a cycle: the
// replicas that served it took it all at once.
func drained(before, now, arrivals float64, horizon time.Duration) bool {
	return before > 0 && now <= before/2 && before/horizon.Seconds() > backlogShare*arrivals
}

// absorbing says the replicas are still serving a backlog drained within
// the last two rate windows, and replicas ordered now would start after
// that. They run full and slow while they do, which is the backlog's
// load, ordered for while it waited, not demand the rates miss or a
// capacity fitted too high: the saturation floor would order, and hold,
// capacity for requests already served (at a spike, 2.6 times the
// arrivals). With a start-up within the two windows the floor's replicas
// serve while it still stands, and the next cycle judges them.
func (c *cycle) absorbing() bool {
	at := c.next.DrainedAt
	return !at.IsZero() && c.g.Now.Sub(at) <= 2*decision.RateWindow && c.horizon > 2*decision.RateWindow
}

// saturationFloor is the demand saturated replicas prove. When more than
// half of the replicas reporting metrics are saturated (KV cache or queue
// at the percentage analyzer's thresholds, or too many of their requests
// over the ITL target: overSLO), they serve all they can while requests
// wait or run slow, so demand exceeds what they supply by at least one
// reference replica, whatever the rate series and the fitted capacity
// say. It returns 0 otherwise, how many replicas are saturated and how
// many of them are over the ITL target. Latency is read only when fresh:
// the TTFT average and the TPOT histogram cover the rate window, and for
// one after a variant gained ready replicas they still count the requests
// served before those took their share (KV cache and queues are read as
// they are now). On Azure conv x2 the floor read two L40S still slow a
// minute after two H100 began serving and ordered two more H100.
func saturationFloor(g decision.Group, caps map[string]ReplicaCapacity, ref ReplicaCapacity, scaling params.Scaling, slo params.SLO, fresh bool) (floor float64, saturated, slow int) {
	var supply float64
	for _, r := range g.Replicas {
		supply += caps[r.Variant].Rate
		over := fresh && overSLO(r, slo)
		if over {
			slow++
		}
		if over || saturation.IsSaturated(r, scaling) {
			saturated++
		}
	}
	if len(g.Replicas) == 0 || 2*saturated <= len(g.Replicas) {
		return 0, saturated, slow
	}
	return supply + ref.Rate, saturated, slow
}

// A replica is over its SLO when more than overSLOBudgets times the SLO's
// error budget of the requests it finished in the rate window (5% at 99%
// attainment, of at least minOverSLORequests) took longer per output
// token than the ITL target: the per-request TPOT histogram says so
// directly where the fitted capacity claims room.
const (
	overSLOBudgets     = 5
	minOverSLORequests = 10
)

func overSLO(r decision.ReplicaMetrics, slo params.SLO) bool {
	if slo.TargetTTFTms > 0 && r.AvgTTFTms > slo.TargetTTFTms && r.ArrivalRate*decision.RateWindow.Seconds() >= minOverSLORequests {
		return true
	}
	n, share := overTarget(r.TPOT, slo.TargetITLms)
	return n >= minOverSLORequests && slo.TargetITLms > 0 && missesITL(share, slo.Attainment)
}

// missesITL says whether a share of requests over the ITL target exceeds
// overSLOBudgets of the SLO's error budget: a replica's share (overSLO) or
// a variant's (shiftFromMissingITL).
func missesITL(share, attainment float64) bool { return share > overSLOBudgets*(1-attainment) }

// holdPeak compares the supply with the demand, adapts the hold to the
// lulls seen, and holds the highest plan of the hold.
func (c *cycle) holdPeak() {
	an := &c.an
	unit := lullUnit(c.horizon)
	c.current = make([]int32, len(c.variants))
	for i, v := range c.variants {
		c.current[i] = v.CurrentReplicas
	}
	an.Supply = c.supplyOf(c.current)
	c.short = an.Supply+1e-9 < an.Staffed
	c.next.Short = c.short
	c.adaptHold(unit)
	c.hold = lulls(c.next.HoldFactor, unit)
	c.next.Rises = rises(c.st.Rises, c.st.Plans, c.g.Now, an.StaffedArrivals, c.ref.Rate, c.horizon, c.hold)
	c.next.Budget = c.st.Budget.record(c.g.Now, c.g.Replicas, c.slo.TargetITLms, queuedTTFT(an.Backlog, c.slo.TargetTTFTms))
	an.BudgetSpent = c.next.Budget.spent(c.slo.Attainment)
	// Whether bursts come back is judged within the first hold
	// (holdFactor, which the learned hold never falls below), not the
	// learned one: the learned hold grows each time demand comes back
	// within it, and judged against itself every burst of a busy day
	// (40 minutes apart on average, all within 2h8m) would have come back.
	if c.next.RiseHistory.enough() && !burstCameBack(c.next.Rises, lulls(holdFactor, unit)) && !an.BudgetSpent {
		// No burst has come back within the hold: nothing says the
		// capacity a rise needed will be needed again soon, and a one-off
		// spike's fleet is not kept for the rest of the hour, while the
		// error budget can pay for the next onset if one comes. A group
		// with less than minRiseHistory of rises has not shown whether
		// its bursts come back: a burst's return onto a fleet given back
		// costs more than the whole budget (the bursty hour's second
		// burst misses a tenth of the hour's requests), so its first lull
		// keeps the full hold.
		c.hold = min(c.hold, lulls(shortHoldFactor, unit))
	}
	if len(c.next.Rises) == 0 && falling(c.st.Plans, c.g.Now, an.ArrivalRate, c.horizon) {
		// A steady fall with no burst in memory is a curve going down (a
		// day's evening), not a lull a burst comes back from: what it
		// gives back is not needed within a start-up, so the hold keeps
		// one start-up's plans, not the peak's for minutes down the curve.
		c.hold = min(c.hold, unit)
	}
	an.Hold = c.hold.String()
	c.remember()
}

// adaptHold doubles the hold when demand comes back over capacity given
// back within it, and shrinks it when a release held for a whole hold.
func (c *cycle) adaptHold(unit time.Duration) {
	next, last := c.next, c.st.LastRelease
	if next.HoldFactor <= 0 {
		next.HoldFactor = holdFactor
	}
	switch {
	case c.short && !last.IsZero() && c.g.Now.Sub(last) < lulls(next.HoldFactor, unit):
		// Demand came back over capacity given back within the hold.
		next.HoldFactor = min(next.HoldFactor*2, maxHoldFactor)
		next.LastRelease = time.Time{}
	case !last.IsZero() && c.g.Now.Sub(last) >= lulls(next.HoldFactor, unit):
		// A release that held for a whole hold was right.
		next.HoldFactor = max(next.HoldFactor*0.75, minHoldFactor)
		next.LastRelease = time.Time{}
	}
}

// remember holds the highest plan of the hold and keeps this cycle's for
// the next.
func (c *cycle) remember() {
	an, next := &c.an, c.next
	an.Held = an.Staffed
	// Plans are remembered for the longer of the hold and the trend's
	// window: a short hold must not starve the trend of history.
	keep := max(c.hold, trendWindow(c.horizon), levelWindow)
	for _, p := range c.st.Plans {
		age := c.g.Now.Sub(p.At)
		if age < keep {
			next.Plans = append(next.Plans, p)
		}
		if age < c.hold {
			an.Held = max(an.Held, p.Rate*levelRatio(p.Level, an.Level))
		}
		if age < min(c.hold, lulls(shortHoldFactor, lullUnit(c.horizon))) {
			an.Held = max(an.Held, p.SlowFloor)
		}
		if age < lullUnit(c.horizon) {
			// Capacity given back must not be needed within a start-up:
			// on a ramp, the forecast of a cycle ago with its noise.
			an.Held = max(an.Held, p.Forecast)
		}
	}
	// The hold remembers arrivals, not the backlog: a backlog is drained
	// once, and the rate that drained it is not needed again.
	// The trend's forecast is held for a start-up only on a line: after a
	// burst's step it is a transient the burst's own plan already holds.
	// On a line, what is given back now must also cover the line two
	// start-ups ahead (the start-up until it is needed again plus the one
	// to get it back), so the held plan keeps that forecast too.
	var forecast float64
	if c.trend.Steadily {
		forecast = staffed(an.LoadRate+2*an.Rising, c.ref, c.slo)
		an.Held = max(an.Held, forecast)
	}
	next.Plans = append(next.Plans, PlanPoint{At: c.g.Now, Rate: an.StaffedArrivals, Arrivals: an.ArrivalRate, Forecast: forecast, SlowFloor: an.SlowFloor, Level: an.Level})
	if len(next.Plans) > maxHistory {
		next.Plans = next.Plans[len(next.Plans)-maxHistory:]
	}
}

// mix is the replicas of each variant (in c.variants' order): added to
// cover a lasting shortfall, kept while replicas start, else the cheapest
// that covers the held plan.
func (c *cycle) mix() []int32 {
	mv := c.mixVariants()
	counts := make([]int32, len(c.variants))
	for i, v := range c.variants {
		counts[i] = decision.Clamp(v.CurrentReplicas, v.MinReplicas, v.MaxReplicas)
	}
	if !c.short {
		carryShortfall(c.g.Now, c.st, c.next)
	}
	switch {
	case c.short && (c.saturated || lasting(c.g.Now, c.st, c.next, c.an.Supply, c.an.Staffed)):
		return c.order(mv)
	case c.short:
		// A small shortfall not yet a metrics window old: hold.
		c.an.Why = WhyPersist
	case pending(c.variants):
		// Replicas still starting have not shown their capacity yet:
		// give nothing back before they serve, but those ordered for
		// evidence that is gone.
		if m, ok := c.cancel(mv, counts); ok {
			return m
		}
		c.an.Why = WhyHorizon
	default:
		return c.release(mv, counts)
	}
	return counts
}

// order covers the present plan. It only adds, so pending replicas are
// never ordered again. The hold keeps capacity through lulls; it orders
// none for a past peak the fleet was not short of then: that peak was
// planned in req/s of another request shape (longer outputs serve fewer
// req/s).
func (c *cycle) order(mv []mixVariant) []int32 {
	an := &c.an
	fitting := append([]mixVariant(nil), mv...)
	addNoneOf(fitting, c.current, c.missingTTFT)
	counts, ok := orderMix(untriedAtDiscount(fitting, an.Variants), an.Staffed)
	if !ok {
		// The variants that fit cannot cover the plan alone: the others
		// serve the rest, missing the TTFT target on some of it.
		counts, ok = orderMix(untriedAtDiscount(mv, an.Variants), an.Staffed)
	}
	for i, v := range c.variants {
		if untried(an.Variants[i]) && counts[i] > v.CurrentReplicas {
			an.Trying = append(an.Trying, v.Name)
		}
	}
	an.Why = WhyDemand
	switch {
	case an.BacklogRate > an.ArrivalRate*backlogShare:
		an.Why = WhyBacklog
	case an.Supply+1e-9 >= staffed(an.LoadRate+an.BacklogRate, c.ref, c.slo):
		an.Why = WhyTrend
		if an.ProfileRise > max(an.Rising, an.RiseMargin) {
			an.Why = WhyProfile
		}
	}
	if c.saturated {
		an.Why = WhySat
	}
	for i, v := range c.variants {
		if counts[i] > v.CurrentReplicas {
			// Only the last order's replicas can be cancelled.
			c.next.UnheldOrderAt = time.Time{}
			if (an.Why == WhySat && an.SlowFloor == 0) || an.Why == WhyBacklog {
				c.next.UnheldOrderAt = c.g.Now
			}
			break
		}
	}
	if !ok {
		an.Why = WhyMax
	}
	return counts
}

// cancel gives back replicas still starting that were ordered for a
// saturation floor or a backlog once neither stands: a few dozen long
// prompts arriving together queue for a few seconds and saturate every
// replica at one scrape, and the replicas ordered for them would take a
// whole start-up of GPU time to serve a minute before the plan, which
// holds neither, gives them back. Only starting replicas go (Kubernetes
// deletes those first), and only down to what the held plan needs: a
// replica ordered for demand that comes back is held like the demand.
func (c *cycle) cancel(mv []mixVariant, counts []int32) ([]int32, bool) {
	at := c.st.UnheldOrderAt
	if at.IsZero() || c.g.Now.Sub(at) > c.horizon+decision.RateWindow || c.saturated || c.an.Backlog >= 1 {
		return counts, false
	}
	for i, v := range c.variants {
		ready := max(v.CurrentReplicas-v.PendingReplicas, 0)
		mv[i].Hi = counts[i]
		mv[i].Lo = min(max(ready, v.MinReplicas), mv[i].Hi)
	}
	keep, ok := cheapestMix(mv, c.an.Held)
	if !ok || mixCost(mv, keep) >= mixCost(mv, counts)-1e-9 {
		return counts, false
	}
	c.an.Why = WhyCancel
	return keep, true
}

// release gives back what the held plan does not need, or moves to a
// cheaper mix that covers it.
func (c *cycle) release(mv []mixVariant, counts []int32) []int32 {
	an, next := &c.an, c.next
	young := c.g.Now.Sub(next.FoundAt) < c.hold
	for i, v := range c.variants {
		mv[i].Hi = decision.Clamp(v.CurrentReplicas, v.MinReplicas, v.MaxReplicas)
		mv[i].Lo = min(v.MinReplicas, mv[i].Hi)
		if young {
			mv[i].Lo = min(max(mv[i].Lo, next.Found[v.Name]), mv[i].Hi)
		}
		if va := an.Variants[i]; onTrial(va) && mv[i].Lo < 1 {
			mv[i].Lo = min(1, mv[i].Hi)
			an.Trial = append(an.Trial, v.Name)
		}
	}
	// The fitted lines are trusted only as far as the replicas were seen
	// serving within the target (withinShown).
	for i, v := range c.variants {
		mv[i].Rate = withinShown(mv[i].Rate, next.Variants[v.Name].ShownLoad, c.an.Input, c.an.Output)
	}
	shares := c.itlShares()
	for _, i := range shiftFromMissingITL(mv, counts, shares, c.slo.Attainment) {
		an.MissingITL = append(an.MissingITL, fmt.Sprintf("%s (%.1f%% of its requests over the ITL target)", c.variants[i].Name, 100*shares[i]))
	}
	addNoneOf(mv, counts, c.missingTTFT)
	keep := counts
	if m, ok := cheapestMixWhere(mv, an.Held, keepsBusiestWithinTarget(mv, counts, an.Staffed)); ok && mixCost(mv, m) < mixCost(mv, counts)-1e-9 {
		keep = m
	}
	swap, swapping := swapMix(c.variants, an.Variants, mv, keep, an.Held, c.hold, young, shares, c.missingTTFT, c.slo, next, c.g.Now)
	switch {
	case swapping:
		an.Why = WhySwap
		next.UnheldOrderAt = time.Time{}
		return swap
	case mixCost(mv, keep) < mixCost(mv, counts)-1e-9:
		if !completesSwap(c.variants, keep, next.SwapTo) {
			next.LastRelease = c.g.Now
		}
		next.SwapTo = nil
		an.Why = WhyDemand
		return keep
	}
	an.Why = WhyHorizon
	if an.Held <= an.Staffed+1e-9 {
		an.Why = WhyDemand
	}
	return counts
}

// shiftFromMissingITL bounds a mix search while one variant's requests
// miss the ITL target by overSLOBudgets of the SLO's error budget and
// another's meet it within one budget: the mix keeps at least the
// replicas (now, in mv's order) of the variants that meet it and adds none
// of those that miss it, so a release or a swap gives back the variant
// its fitted line overrates, not the one whose requests meet the target
// (a line fitted on prefill-heavy traffic can be off by a factor; the
// requests over the target are measured). shares are the variants' last
// shares over the target (itlShares; negative where none is known). It
// returns the indices of the variants that miss it, none when it bounds
// nothing.
func shiftFromMissingITL(mv []mixVariant, now []int32, shares []float64, attainment float64) []int {
	budget := 1 - attainment
	var missing []int
	running, meeting := false, false
	for i, s := range shares {
		if missesITL(s, attainment) {
			missing = append(missing, i)
			running = running || now[i] > 0
		}
		meeting = meeting || (s >= 0 && s <= budget)
	}
	if !running || !meeting {
		return nil
	}
	addNoneOf(mv, now, missing)
	for i, s := range shares {
		if s >= 0 && s <= budget {
			mv[i].Lo = max(mv[i].Lo, min(now[i], mv[i].Hi))
		}
	}
	return missing
}

// keepsBusiestWithinTarget accepts a release that leaves the busiest
// variant under the gateway's split within 1/itlHeadroom of its line at
// plan d, where its mean ITL reaches the target (or no further past it
// than now), or that gives back only that variant's replicas. The mix's
// supply averages its requests' loads, so giving back replicas of a
// variant the gateway loads less piles requests on the one it loads
// past its line: on Azure conv x4.5, 2 L40S + 4 H100 released to 1 L40S
// + 3 H100 at 27 req/s put the L40S at 1.3 times its line, and the four
// replicas saturated the next minute.
func keepsBusiestWithinTarget(mv []mixVariant, counts []int32, d float64) func([]int32) bool {
	now, _ := busiestLoad(mv, counts, d)
	limit := max(1/itlHeadroom, now)
	return func(m []int32) bool {
		u, factor := busiestLoad(mv, m, d)
		if u <= limit+1e-9 {
			return true
		}
		for i, v := range mv {
			if m[i] != counts[i] && v.factor() < factor {
				return false
			}
		}
		return true
	}
}

// itlShares is each variant's last share of requests over the ITL target
// told within a start-up delay (in c.variants' order), -1 where none is:
// a lull between bursts reports too few requests to tell, and the share
// the last burst showed is what the next one will show while a release
// made now cannot be undone sooner.
func (c *cycle) itlShares() []float64 {
	shares := make([]float64, len(c.variants))
	for i, v := range c.variants {
		shares[i] = -1
		if vs := c.next.Variants[v.Name]; !vs.ITLOverAt.IsZero() && c.g.Now.Sub(vs.ITLOverAt) < c.horizon {
			shares[i] = vs.ITLOver
		}
	}
	return shares
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

// untriedPriceShare of its cost is what an order prices a replica of a
// variant never seen running at. Its rate is only the fair-price guess
// (fairPrice), which makes it exactly as cost-efficient as the proven
// variant, so at its full price the search never picks it and the plan
// never learns what it serves: a fleet that starts on L40S would stay on
// L40S where an H100 serves twice the requests per unit of cost. Only the
// choice is discounted; the rate covering the demand is the fair price,
// so the plan is no shorter for trying. Once a replica runs, the variant
// is priced in full and what it serves decides. Every share from 0.8 down
// to 0.5 orders the same fleets on the benchmark's workloads and their
// other seeds: what matters is that a replica is tried at all.
const untriedPriceShare = 2.0 / 3

// untried says whether a variant has no replica and has never been seen
// serving.
func untried(va VariantAnalysis) bool { return va.Observations == 0 && va.Current == 0 }

// A variant tried (untriedAtDiscount) is credited the fair price until
// one of its replicas serves half its fitted rate (proven), and at the
// fair price it ties with the proven variant: the cheapest release then
// drops it whenever one replica of it costs more than the other's, and
// the plan never learns what it serves. On the ramp the H100 tried
// during the warm-up served 4.5 minutes beside four L40S before it went;
// the plan ran on L40S at 5 req/s each where an H100 serves 10, and
// ordered H100s again 19 minutes later. So a scale-down keeps one
// replica of a variant on trial for trialLength from when it began
// serving; once proven, its own line decides.
const trialLength = 20 * time.Minute

// onTrial says a variant runs, has not yet proven its rate and began
// serving within trialLength. proven is read again here, not only where
// learn set TrialFrom: fairPrice has since credited a variant the gateway
// loaded past its fair price with its seen load (twice its peak). At that
// rate it reads as proven and costs less per request than the proven
// variant: the cheapest release keeps it without a trial.
func onTrial(va VariantAnalysis) bool {
	return va.OnTrial && va.Current > 0 && va.Observations > 0 && !proven(va)
}

// untriedAtDiscount returns the variants an order searches: the untried
// ones at untriedPriceShare of their cost.
func untriedAtDiscount(mv []mixVariant, an []VariantAnalysis) []mixVariant {
	out := append([]mixVariant(nil), mv...)
	for i := range out {
		if untried(an[i]) {
			out[i].Cost *= untriedPriceShare
		}
	}
	return out
}

// fairPrice gives a variant not yet proven the rate per replica that makes
// it exactly as cost-efficient as the best-proven variant, or its own
// fitted rate where that is lower. The engine-args prior knows nothing of
// the accelerator's speed, and a line fitted from replicas seen only near
// idle extrapolates their intercept far (an H100 seen at 0.5 req/s was
// credited with 8.7 req/s where it serves 4): a variant ordered on a wrong
// guess costs a start-up delay to correct. The plan still tries it where
// its price makes it fit the mix better, and its replicas then prove it.
func fairPrice(variants []decision.Variant, caps map[string]ReplicaCapacity, an []VariantAnalysis) {
	ref := -1
	for i, va := range an {
		if va.Observations == 0 || variants[i].Cost <= 0 {
			continue
		}
		if ref < 0 || (proven(va) && !proven(an[ref])) || (proven(va) == proven(an[ref]) && va.Observations > an[ref].Observations) {
			ref = i
		}
	}
	if ref < 0 {
		return
	}
	unit := caps[variants[ref].Name].Rate / variants[ref].Cost
	for i, va := range an {
		if i == ref || variants[i].Cost <= 0 || proven(va) {
			continue
		}
		c := caps[variants[i].Name]
		fair := unit * variants[i].Cost
		if va.Observations > 0 && c.Rate <= fair {
			continue
		}
		c.Rate, c.Bound = fair, "fair-price-prior"
		if seen := va.PeakLoad / provenShare; va.Observations > 0 && seen > fair {
			// Its line is trusted as far as it was seen: a variant the
			// gateway never loads to half its fitted rate would stay at
			// the fair price, tied with the reference, and the mix
			// would follow the order the variants happened to run in.
			c.Rate, c.Bound = seen, "seen-load"
		}
		caps[variants[i].Name] = c
		an[i].Capacity = c
	}
}

// provenShare of its estimated rate per replica is the load one of a
// variant's replicas must have been seen serving before its fitted line is
// trusted above the fair price.
const provenShare = 0.5

// loadRate is the mean arrival rate over the last span: the current rate
// window's and those of the remembered cycles whose windows fall within
// it. A span within one rate window is the current rate. The rise history
// smooths each of its points the same way.
func loadRate(plans []PlanPoint, now time.Time, cur float64, span time.Duration) float64 {
	sum, n := cur, 1.0
	for _, p := range plans {
		if now.Sub(p.At)+decision.RateWindow <= span {
			sum += p.Arrivals
			n++
		}
	}
	return sum / n
}

// staffed is a rate plus the square-root margin for the SLO's attainment:
// the requests in service fluctuate by about sqrt(rate * duration) around
// the mean (in concurrency slots).
func staffed(rate float64, ref ReplicaCapacity, slo params.SLO) float64 {
	if rate <= 0 || ref.RequestSeconds <= 0 {
		return rate
	}
	return rate + z(slo.Attainment)*math.Sqrt(rate/ref.RequestSeconds)
}

// backlogShare of the arrivals is the backlog rate (drained over a
// start-up) that makes an order the backlog's.
const backlogShare = 0.1

// shortHoldFactor lullUnits is the hold until a burst comes back:
// long enough to ride out the dips within one burst.
const shortHoldFactor = 3

// rises records a burst's onset when the staffed arrivals exceed their
// lowest of the last start-up delay by two reference replicas, at most one
// per start-up delay, and keeps those within two holds (burstCameBack).
func rises(prev []time.Time, plans []PlanPoint, now time.Time, staffedNow, refRate float64, horizon, hold time.Duration) []time.Time {
	var out []time.Time
	for _, t := range prev {
		if now.Sub(t) < 2*hold {
			out = append(out, t)
		}
	}
	low := math.Inf(1)
	for _, p := range plans {
		if now.Sub(p.At) <= horizon {
			low = min(low, p.Rate)
		}
	}
	if refRate > 0 && !math.IsInf(low, 1) && staffedNow-low >= 2*refRate && (len(out) == 0 || now.Sub(out[len(out)-1]) >= horizon) {
		out = append(out, now)
	}
	return out
}

// burstCameBack says a burst of the last two holds came back within a
// hold of the one before it. Bursts 10 minutes apart have shown how soon
// they return even once the first is older than the hold, so the last
// one's capacity is kept for the full hold, not given back after a short
// one just before the next comes.
func burstCameBack(onsets []time.Time, hold time.Duration) bool {
	for i := 1; i < len(onsets); i++ {
		if onsets[i].Sub(onsets[i-1]) < hold {
			return true
		}
	}
	return false
}

func pending(variants []decision.Variant) bool {
	for _, v := range variants {
		if v.PendingReplicas > 0 {
			return true
		}
	}
	return false
}

func mixCost(vs []mixVariant, counts []int32) float64 {
	c := 0.0
	for i, v := range vs {
		c += float64(counts[i]) * v.Cost
	}
	return c
}

// demand is the arrival rate: the gateway's when reported, else what the
// replicas complete (under-reads while a queue grows).
func demand(g decision.Group) (float64, string) {
	if g.GatewayArrivalsReported && g.GatewayArrivalRate >= 0 && decision.Finite(g.GatewayArrivalRate) {
		return g.GatewayArrivalRate, "gateway arrivals"
	}
	var sum float64
	for _, r := range g.Replicas {
		if r.ArrivalRate > 0 && decision.Finite(r.ArrivalRate) {
			sum += r.ArrivalRate
		}
	}
	return sum, "replica completions"
}

// startupHorizon is the longest start-up delay among the variants holding
// replicas (among all when none does): what a lull costs to ride out is
// the start-up of the capacity it would give back, not of a variant the
// plan does not use.
func startupHorizon(variants []decision.Variant, learned map[string]VariantState, slo params.SLO) time.Duration {
	h := time.Duration(0)
	for _, holding := range []bool{true, false} {
		for _, v := range variants {
			if v.MaxReplicas == 0 || (holding && v.CurrentReplicas == 0) {
				continue
			}
			h = max(h, startupOf(v, learned[v.Name], slo))
		}
		if h > 0 {
			break
		}
	}
	return max(h, 30*time.Second)
}

// startupOf is a variant's measured start-up delay, else the last one
// measured, else the configured fallback.
func startupOf(v decision.Variant, vs VariantState, slo params.SLO) time.Duration {
	switch {
	case v.StartupDelay > 0:
		return v.StartupDelay
	case vs.StartupDelay > 0:
		return vs.StartupDelay
	}
	return slo.StartupDelay.D()
}

// lullUnit is what the hold counts a lull in: the time capacity given
// back takes to serve again. That is its start-up, but never less than
// one metrics window: the demand that needs it back is seen no sooner.
// Counted in start-ups as short as 30 s, a bursty hour would release its
// fleet in every lull, and each burst's onset would then cost more misses
// than the SLO allows.
func lullUnit(horizon time.Duration) time.Duration { return max(horizon, decision.RateWindow) }

// lulls is factor lull units: the holds and the bounds on them are
// counted in them.
func lulls(factor float64, unit time.Duration) time.Duration {
	return time.Duration(factor * float64(unit))
}

// referenceCapacity is the capacity of the variant with the lowest cost
// per unit of rate: the one the margin is mostly made of.
func referenceCapacity(variants []decision.Variant, caps map[string]ReplicaCapacity) ReplicaCapacity {
	var best ReplicaCapacity
	bestUnit := math.Inf(1)
	for _, v := range variants {
		c := caps[v.Name]
		// A variant at the fair price ties with its reference: the
		// first stays, not whichever rounds lower.
		if c.Rate > 0 && v.MaxReplicas > 0 && v.Cost/c.Rate < bestUnit*(1-1e-9) {
			best, bestUnit = c, v.Cost/c.Rate
		}
	}
	return best
}

// shapeMemory is how long the request shape the plan sizes by takes to
// follow a change of the replicas' token averages (to 63%).
const shapeMemory = 5 * time.Minute

// requestShape is the arrival-weighted mean input and output tokens of the
// replicas, else the remembered shape, else a default.
func requestShape(g decision.Group, st State) (in, out float64) {
	var w, si, so float64
	for _, r := range g.Replicas {
		if r.AvgOutputTokens > 0 && decision.Finite(r.AvgOutputTokens) && r.AvgInputTokens >= 0 && decision.Finite(r.AvgInputTokens) {
			weight := max(r.ArrivalRate, 1e-3)
			w += weight
			si += weight * r.AvgInputTokens
			so += weight * r.AvgOutputTokens
		}
	}
	switch {
	case w > 0 && st.Output > 0 && len(st.Plans) > 0:
		// The replicas' 5m means swing with the few long requests that
		// finish in a window (a reasoning model's 30k-token answers) and
		// read short on a new replica (its short requests finish
		// first): the shape the plan sizes by moves by their average
		// over shapeMemory.
		a := min(1, g.Now.Sub(st.Plans[len(st.Plans)-1].At).Seconds()/shapeMemory.Seconds())
		if a <= 0 {
			a = 1 // no time passed (a replay): the replicas as they are
		}
		return st.Input + a*(si/w-st.Input), st.Output + a*(so/w-st.Output)
	case w > 0:
		return si / w, so / w
	case st.Output > 0:
		return st.Input, st.Output
	default:
		return defaultInputTokens, defaultOutputTokens
	}
}

// learn updates a variant's ITL line from its replicas and derives its
// capacity at the SLO.
//
// A variant never seen running has an optimistic prior (its KV cache size
// is unknown until a pod reports it): the plan tries it when it looks
// cheapest, and what its replicas then show corrects the line.
func learn(v decision.Variant, reps []decision.ReplicaMetrics, vs VariantState, slo params.SLO, in, out float64, short bool, now time.Time) (VariantAnalysis, VariantState) {
	if v.StartupDelay > 0 {
		vs.StartupDelay = v.StartupDelay
	}
	va := VariantAnalysis{Name: v.Name, Current: v.CurrentReplicas, StartupDelay: startupOf(v, vs, slo).String(), Ready: readyReplicas(v.Name, reps)}
	if va.Ready > vs.LastReady && vs.Seen {
		vs.Settle = settleCycles
	} else if vs.Settle > 0 {
		vs.Settle--
	}
	vs.LastReady, vs.Seen = va.Ready, true
	fit := vs.Fit
	if va.Ready > 0 {
		// Memory fades only while there is something new to learn: what
		// was learned is kept for a variant at zero replicas.
		fit.decay()
	}
	for _, r := range reps {
		if r.Variant != v.Name {
			continue
		}
		if kv := r.KVCapacityTokens(); kv > 0 {
			vs.KVTokens = kv
		}
		if vs.Settle > 0 {
			continue
		}
		if pr, ok := promptRate(r); ok {
			// The fastest reading lately, fading as the fit does: one
			// reading of a minute's TTFT against five minutes' mean
			// prompt can read fast, and must not stay the answer.
			vs.PromptRate = max(pr, vs.PromptRate*forget)
		}
		if r.ArrivalRate > 0 && decision.Finite(r.ArrivalRate) && r.AvgITLms > 0 && decision.Finite(r.AvgITLms) {
			// The replica's own request shape where it reports one.
			pin, pout := in, out
			if r.AvgOutputTokens > 0 && decision.Finite(r.AvgOutputTokens) && r.AvgInputTokens >= 0 && decision.Finite(r.AvgInputTokens) {
				pin, pout = r.AvgInputTokens, r.AvgOutputTokens
			}
			fit.add(r.ArrivalRate*(pin+pout), r.ArrivalRate*pout*(pin+pout/2), 1000/r.AvgITLms, 1)
			vs.PeakLoad = max(vs.PeakLoad, r.ArrivalRate)
		}
	}
	vs.Fit = fit
	lim := Limits{MaxNumSeqs: defaultMaxNumSeqs}
	if v.MaxNumSeqs > 0 {
		lim.MaxNumSeqs = float64(v.MaxNumSeqs)
	}
	switch {
	case vs.KVTokens > 0:
		lim.KVConcurrency = kvHeadroom * vs.KVTokens / (in + out/2)
	}
	va.Curve = fit.solve(prior(slo.TargetITLms, in, out, lim))
	va.Observations = fit.Obs
	va.Limits = lim
	h := headroomOf(vs.Headroom)
	// The KV bound times a request with the shorter of the two fits'
	// ITLs (capacityAt): where they differ, the observations left the
	// slope to the priors.
	timing := va.Curve
	if vs.PromptRate > 0 && in > 0 && va.Curve.P > 0 {
		timing = fit.solve(promptPrior(va.Curve.P, in, out, vs.PromptRate))
	}
	va.Capacity = capacityAt(va.Curve, timing, lim, h, slo.TargetITLms, slo.TargetTTFTms, in, out)
	if vs.Settle == 0 {
		att := observeAttainment(v.Name, reps, slo.TargetITLms, slo.TargetTTFTms)
		va.TPOTOverTarget = att.Over
		if att.Requests >= minOverSLORequests {
			vs.ITLOver, vs.ITLOverAt = att.Over, now
			if att.Over <= 1-slo.Attainment {
				vs.ShownLoad = max(vs.ShownLoad, att.Load*(in+out))
			}
		}
		if now.Sub(vs.VerdictAt) < decision.RateWindow {
			// The window still holds requests the last verdict
			// counted: report them, pool nothing.
			att = attainment{}
		}
		prev := h
		var judged bool
		h, vs.TPOTPool, judged = adaptHeadroom(h, vs.TPOTPool, att, va.Capacity.Rate, slo.Attainment, short)
		if judged {
			vs.VerdictAt = now
		}
		if h != prev {
			va.Capacity = capacityAt(va.Curve, timing, lim, h, slo.TargetITLms, slo.TargetTTFTms, in, out)
		}
		vs.Headroom = h
	}
	va.Headroom = h
	va.PeakLoad = vs.PeakLoad
	switch {
	case va.Ready == 0 || proven(va):
		vs.TrialFrom = time.Time{}
	case vs.TrialFrom.IsZero():
		vs.TrialFrom = now
	}
	va.OnTrial = !vs.TrialFrom.IsZero() && now.Sub(vs.TrialFrom) < trialLength
	if !short && loadPerReplica(v.Name, reps) <= va.Capacity.Rate {
		// Misses while the group is short of supply or replicas start,
		// or the variant loaded past its rate, are queues the plan
		// orders for, not requests the variant cannot hold.
		vs.TTFTPool = vs.TTFTPool.pool(ttftMisses(v.Name, reps, slo.TargetTTFTms))
	}
	va.TTFTMisses, _ = vs.TTFTPool.share()
	return va, vs
}

// z is the standard normal quantile of p (p in (0, 1); the SLO attainment
// is validated to [0.5, 0.9999]).
func z(p float64) float64 { return math.Sqrt2 * math.Erfinv(2*p-1) }

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

// carryShortfall keeps, in a cycle at the plan, when the last small
// shortfall began if that is within two metrics windows: one cycle at the
// plan between two short ones is noise, not the shortfall's end.
func carryShortfall(now time.Time, st State, next *State) {
	if !st.ShortSince.IsZero() && now.Sub(st.ShortSince) < 2*persistFor {
		next.ShortSince = st.ShortSince
	}
}

// lasting says whether a shortfall should order now: at once when it
// exceeds smallShortfall of the supply, else once it has lasted
// persistFor. It records when a small shortfall began in next.
func lasting(now time.Time, st State, next *State, supply, need float64) bool {
	if need > supply*(1+smallShortfall) {
		return true
	}
	since := st.ShortSince
	if since.IsZero() {
		since = now
	}
	if now.Sub(since) >= persistFor {
		return true
	}
	next.ShortSince = since
	return false
}

// promptRate is the rate a replica computes prompts at, read from its
// mean TTFT while nothing waits in its queue: the prompt tokens not served
// from the prefix cache over the time to their first token (which then
// also holds at most one step of the requests already running, so it
// reads a little low). ok is false while requests queue or a figure is
// missing.
func promptRate(r decision.ReplicaMetrics) (float64, bool) {
	if r.QueueLength != 0 || r.AvgTTFTms <= 0 || !decision.Finite(r.AvgTTFTms) || r.AvgInputTokens <= 0 || !decision.Finite(r.AvgInputTokens) {
		return 0, false
	}
	computed := r.AvgInputTokens * (1 - decision.Clamp01(r.PrefixCacheHitRate))
	return computed / (r.AvgTTFTms / 1000), computed > 0
}

// withinShown bounds a replica's rate for a scale-down by how far its
// variant's requests were seen meeting the ITL target: a line fitted at a
// fraction of its rate extrapolates its slope far (prefill-heavy traffic
// whose bursts fill a step's token budget misses at a third of its fitted
// rate), so a release credits a replica with at most 1/provenShare times
// the highest load per replica (tokens per second, shownTokens) its
// variant served within the target. 0: never seen loaded, unbounded.
func withinShown(rate, shownTokens, in, out float64) float64 {
	if shownTokens <= 0 || in+out <= 0 {
		return rate
	}
	return min(rate, shownTokens/(in+out)/provenShare)
}
