package planner

import (
	"math"
	"sort"
	"time"

	"github.com/wva-project/wva/pkg/decision"
)

// A replica ordered now serves one start-up delay later, so demand that
// rises faster than that lands on the fleet of before the rise. The trend
// (trend.go) sees a rise only once it is under way; the rise margin is what
// the group's own history says demand can add within a start-up delay
// before the trend shows it. Each cycle records how far the arrivals rose
// over the start-up delay that just ended (the highest rate of the delay
// against its first, each averaged over a request's duration, less the
// Poisson noise of that average), as a share of the rate it started from,
// in a histogram that forgets with a half-life of riseHalfLife and is
// persisted with the planner's state. The margin is the rise that all but
// riseBudget error budgets of the delays stayed within, times the rate it
// rises from (riseBase: the load, or the level at a burst while the error
// budget holds): where bursts come within a start-up the plan carries their
// usual size, and a smooth day carries little. The margin is held like the
// demand it is planned with: a burst that came back within the hold is
// still covered. A group with less than minRiseHistory of history has too
// few delays for the histogram (an hour holds a burst or two) and plans as
// without, unless it is missing its SLO (its error budget spent,
// budget.go): then it reads the rises of the delays it remembers that
// started near its rate now (recentRise), since a burst's rise from the
// lull before it says nothing of what follows its peak.
const (
	// riseBin is the histogram's bin width, in shares of the rate;
	// riseBins of them reach a rise of 4x.
	riseBin  = 0.05
	riseBins = 80
	// riseHalfLife is how long a recorded rise counts for half.
	riseHalfLife = 12 * time.Hour
	// minRiseHistory is the history worth planning on.
	minRiseHistory = 2 * time.Hour
	// riseNoiseSigmas of the rate window's Poisson noise are not a rise.
	riseNoiseSigmas = 2
	// riseBudget is how many times the SLO's error budget of start-up
	// delays may rise beyond the margin: 10% of them at 99% attainment
	// (a rise beyond it costs misses for part of one delay, not all of
	// its requests).
	riseBudget = 10
)

// RiseHistory is the histogram of the rises seen within a start-up delay.
type RiseHistory struct {
	// Bins are the decayed weights of rises in [i, i+1) x riseBin.
	Bins []float64 `json:"bins,omitempty"`
	// Since is when the first delay was recorded, At the last.
	Since time.Time `json:"since,omitempty"`
	At    time.Time `json:"at,omitempty"`
}

// record adds the rise over the start-up delay that ended now, read from
// the remembered arrivals and the current rate, each averaged over span
// (a request's duration; at least the rate window, whose Poisson noise
// the rise is counted beyond); it records nothing until the history
// covers a whole delay.
func (h RiseHistory) record(plans []PlanPoint, now time.Time, cur float64, horizon, span time.Duration) RiseHistory {
	window := decision.RateWindow
	span = max(span, window)
	pts := plansToNow(plans, now, cur)
	// smoothed is the mean of the 1m rates whose windows fall within span
	// of point i's end.
	smoothed := func(i int) float64 {
		return loadRate(pts[:i], pts[i].At, pts[i].Arrivals, span)
	}
	// The youngest point a whole delay old starts the delay (the points
	// are oldest first).
	first := -1
	for i, p := range pts {
		if now.Sub(p.At) >= horizon {
			first = i
		}
	}
	if first < 0 {
		return h
	}
	start := smoothed(first)
	if start <= 0 {
		return h
	}
	peak := 0.0
	for i := first + 1; i < len(pts); i++ {
		peak = max(peak, smoothed(i))
	}
	share := riseShare(start, peak, span)
	out := RiseHistory{Bins: make([]float64, riseBins), Since: h.Since, At: now}
	if out.Since.IsZero() {
		out.Since = now
	}
	decay := 1.0
	if !h.At.IsZero() && now.After(h.At) {
		decay = math.Exp2(-now.Sub(h.At).Hours() / riseHalfLife.Hours())
	}
	for i := range min(len(h.Bins), riseBins) {
		out.Bins[i] = h.Bins[i] * decay
	}
	out.Bins[min(int(share/riseBin), riseBins-1)]++
	return out
}

// plansToNow is the remembered plans (oldest first) and the rate now as
// the last point, the series a delay's rise is read from.
func plansToNow(plans []PlanPoint, now time.Time, cur float64) []PlanPoint {
	return append(append(make([]PlanPoint, 0, len(plans)+1), plans...), PlanPoint{At: now, Arrivals: cur})
}

// riseShare is a delay's rise from start to peak (each averaged over
// span) beyond the average's Poisson noise, as a share of start.
func riseShare(start, peak float64, span time.Duration) float64 {
	noise := riseNoiseSigmas * math.Sqrt(start/span.Seconds())
	return max(0, peak-start-noise) / start
}

// enough says the histogram covers minRiseHistory.
func (h RiseHistory) enough() bool {
	return !h.Since.IsZero() && h.At.Sub(h.Since) >= minRiseHistory
}

// margin is the rise share that all but the error budget's share of the
// recorded delays stayed within (the upper edge of its bin), 0 with too
// little history.
func (h RiseHistory) margin(attainment float64) float64 {
	if !h.enough() {
		return 0
	}
	var total float64
	for _, w := range h.Bins {
		total += w
	}
	if total <= 0 {
		return 0
	}
	cover := 1 - riseBudget*(1-attainment)
	if cover <= 0 {
		return 0
	}
	var sum float64
	for i, w := range h.Bins {
		sum += w
		if sum >= cover*total-1e-12 {
			if i == 0 {
				return 0
			}
			return float64(i+1) * riseBin
		}
	}
	return float64(riseBins) * riseBin
}

const (
	// nearStart is how far (a factor either way) a remembered delay's
	// starting rate may be from the rate now for its rise to count.
	nearStart = 1.5
	// minRecentRises is the fewest delays recentRise reads a margin from.
	minRecentRises = 10
)

// recentRise is the rise share read from the remembered plans alone: the
// share that all but riseBudget error budgets of the start-up delays that
// started within nearStart of load rose by (averaged over span, as
// record), 0 with fewer than minRecentRises of them. At a burst's peak it
// counts the rises from peaks (none), in the lull after it the rises from
// lulls (to the next burst).
func recentRise(plans []PlanPoint, now time.Time, cur, load float64, horizon, span time.Duration, attainment float64) float64 {
	cover := 1 - riseBudget*(1-attainment)
	if cover <= 0 || load <= 0 {
		return 0
	}
	span = max(span, decision.RateWindow)
	pts := plansToNow(plans, now, cur)
	smoothed := make([]float64, len(pts))
	for i, p := range pts {
		smoothed[i] = loadRate(pts[:i], p.At, p.Arrivals, span)
	}
	var shares []float64
	for i, p := range pts {
		start := smoothed[i]
		if now.Sub(p.At) < horizon || start <= 0 || start*nearStart < load || start > load*nearStart {
			continue
		}
		peak := 0.0
		for j := i + 1; j < len(pts) && pts[j].At.Sub(p.At) <= horizon; j++ {
			peak = max(peak, smoothed[j])
		}
		shares = append(shares, riseShare(start, peak, span))
	}
	if len(shares) < minRecentRises {
		return 0
	}
	sort.Float64s(shares)
	return shares[min(len(shares), int(math.Ceil(cover*float64(len(shares)))))-1]
}
