package scenario

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"time"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/sim/trace"
)

// The ranges a scenario's fields must lie in. They are far outside any real
// fleet or workload; what they rule out are typos and hostile files that
// would make a run overflow (a 1e300 ms step is no longer a duration),
// exhaust memory (requests, pods and intervals are held per run) or never
// end (1 ns control intervals, an exponential mix search). docs/simulator.md
// lists them.
const (
	// MaxVariants bounds the variants of a scenario: the oracle searches
	// integer mixes of all of them.
	MaxVariants = 8
	// MaxReplicas bounds each variant's maxReplicas.
	MaxReplicas = 1000
	// MaxMixSearch bounds the fleets the oracle may test per interval: the
	// mixes of every variant but the first times the search steps on the
	// first (see cheapestMix). The embedded scenario needs 143.
	MaxMixSearch = 20_000
	// MaxRate bounds synthetic rates (requests/s); the requests generated
	// are bounded by trace.MaxRequests as well.
	MaxRate = 100_000
)

// floatRange is [lo, hi], or (lo, hi] when open.
type floatRange struct {
	lo, hi float64
	open   bool
	unit   string // printed after each number
}

func (r floatRange) String() string {
	left := "["
	if r.open {
		left = "("
	}
	return left + r.format(r.lo) + ", " + r.format(r.hi) + "]"
}

// format prints integers up to int32's range in full (2147483647 replicas,
// not 2.147483647e+09), other numbers shortest, with the unit.
func (r floatRange) format(v float64) string {
	s := strconv.FormatFloat(v, 'g', -1, 64)
	if v == math.Trunc(v) && math.Abs(v) <= math.MaxInt32 {
		s = strconv.FormatFloat(v, 'f', -1, 64)
	}
	if r.unit != "" {
		s += " " + r.unit
	}
	return s
}

// check names the field when v is outside the range (NaN always is).
func (r floatRange) check(field string, v float64) error {
	ok := v >= r.lo && v <= r.hi && !(r.open && v == r.lo)
	if ok {
		return nil
	}
	return &FieldError{Field: field, Err: fmt.Errorf("%s is outside %s", r.format(v), r)}
}

// durationRange is [lo, hi].
type durationRange struct{ lo, hi time.Duration }

func (r durationRange) check(field string, d time.Duration) error {
	if d >= r.lo && d <= r.hi {
		return nil
	}
	return &FieldError{Field: field, Err: fmt.Errorf("%s is outside [%s, %s]", d, r.lo, r.hi)}
}

// FieldError is a scenario field outside its range; Field is its path in
// the scenario (variants[1].server.alpha).
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// Field ranges, one place each.
var (
	costRange     = floatRange{lo: 0, hi: llmdv1alpha1.MaxVariantCost}
	replicasRange = floatRange{lo: 1, hi: MaxReplicas}
	startupRange  = durationRange{0, 24 * time.Hour}

	overheadRange        = floatRange{lo: 0, hi: 60_000, unit: "ms"}
	alphaRange           = floatRange{lo: 0.01, hi: 60_000, unit: "ms"}
	betaRange            = floatRange{lo: 0, hi: 100, unit: "ms"}
	gammaRange           = floatRange{lo: 0, hi: 10, unit: "ms"}
	numGPUBlocksRange    = floatRange{lo: 1, hi: 1_000_000}
	blockSizeRange       = floatRange{lo: 1, hi: 1024}
	maxNumSeqsRange      = floatRange{lo: 1, hi: 100_000}
	batchedTokensRange   = floatRange{lo: 1, hi: 10_000_000}
	sloLatencyRange      = durationRange{time.Millisecond, time.Hour}
	attainmentRange      = floatRange{lo: 0, hi: 1, open: true}
	controlIntervalRange = durationRange{time.Second, time.Hour}
	scrapeIntervalRange  = durationRange{time.Second, 10 * time.Minute}
	oracleIntervalRange  = durationRange{10 * time.Second, time.Hour}
	terminationRange     = durationRange{time.Second, time.Hour}
	fromZeroDelayRange   = durationRange{time.Millisecond, time.Hour}
	warmupRange          = durationRange{0, 24 * time.Hour} // negative disables it
	timeScaleRange       = floatRange{lo: 0.001, hi: 1000}
	rateScaleRange       = floatRange{lo: 0, hi: trace.MaxRateScale, open: true}
	spanRange            = durationRange{0, trace.MaxSpan}
	trafficDurationRange = durationRange{time.Second, trace.MaxSpan}
	rateRange            = floatRange{lo: 0, hi: MaxRate, unit: "req/s"}
	tokensRange          = floatRange{lo: 1, hi: trace.MaxTokens}
	maxTokensRange       = floatRange{lo: 0, hi: trace.MaxTokens} // 0: 8x the mean
	sigmaRange           = floatRange{lo: 0, hi: 2}               // 0: 0.8
	fractionRange        = floatRange{lo: 0, hi: 1}
	openFractionRange    = floatRange{lo: 0, hi: 1, open: true}
	queueTargetRange     = floatRange{lo: 0, hi: 1e6, open: true}
	countRange           = floatRange{lo: 0, hi: 1e6}
)

// MixSearch is how many fleets cheapestMix may test per interval: every
// mix of the variants but the first, times the search steps on the first
// (a gallop and a bisection: at most 2*bits.Len(range)+1). Saturates
// rather than overflowing.
func MixSearch(variants []VariantSpec) float64 {
	n := 1.0
	for i, v := range variants {
		span := float64(v.MaxReplicas) - float64(v.MinReplicas) + 1
		if i == 0 {
			span = float64(2*bits.Len32(uint32(max(v.MaxReplicas-v.MinReplicas, 0))) + 1)
		}
		n = math.Min(n*span, math.MaxFloat64)
	}
	return n
}
