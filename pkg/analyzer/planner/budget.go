package planner

import (
	"math"
	"time"

	"github.com/wva-project/wva/pkg/decision"
)

// The SLO's error budget is the share of requests allowed over target (1%
// at 99% attainment). Budget is what the group spent of it lately: its
// requests and those over the ITL target (the replicas' TPOT histograms)
// or, while requests wait, over the TTFT target (queuedTTFT), each
// decayed over budgetMemory. While the budget holds, a one-off rise's
// capacity is given back after a short hold (the next onset, if it comes,
// may spend some); once spent, the plan holds every rise for the full hold
// instead of risking the next onset's misses on top.
type Budget struct {
	Requests float64   `json:"requests,omitempty"`
	Over     float64   `json:"over,omitempty"`
	At       time.Time `json:"at,omitzero"`
}

const (
	// budgetMemory is how long misses count against the budget (to 1/e).
	budgetMemory = time.Hour
	// minBudgetRequests is the requests below which nothing is judged.
	minBudgetRequests = 100
)

// record adds the requests the replicas finished since the last cycle
// (their histograms are rates over the rate window). A request over both
// targets may count twice, up to the requests counted; TTFT misses count
// from whole buckets (wholeBucketsAbove), none when targetTTFTms is 0.
// On the day, counting the onsets' TTFT misses took it from 97.87% to
// 98.17% for 1% more.
func (b Budget) record(now time.Time, w window, targetITLms, targetTTFTms float64) Budget {
	dt := decision.RateWindow
	if !b.At.IsZero() {
		dt = min(max(now.Sub(b.At), 0), decision.RateWindow)
	}
	decay := forgetting(dt)
	finished, share := w.misses(targetITLms, targetTTFTms)
	n := finished * dt.Seconds() / decision.RateWindow.Seconds()
	over := n * share
	if !decision.Finite(n) || !decision.Finite(over) {
		return b
	}
	return Budget{Requests: b.Requests*decay + n, Over: b.Over*decay + over, At: now}
}

// forgetting is the weight the budget's memory leaves after dt on what
// was counted before it (Budget, and the requests a headroom verdict is
// judged against, Pool.Seen).
func forgetting(dt time.Duration) float64 {
	return math.Exp(-dt.Seconds() / budgetMemory.Seconds())
}

// spent says whether the requests over target exceed the error budget of
// the attainment target.
func (b Budget) spent(attainment float64) bool {
	return b.Requests >= minBudgetRequests && b.Over > (1-attainment)*b.Requests
}

// covers says whether the budget holds with ahead more requests, share of
// them over target.
func (b Budget) covers(attainment, ahead, share float64) bool {
	return b.Requests >= minBudgetRequests && !b.spent(attainment) &&
		b.Over+share*ahead <= (1-attainment)*(b.Requests+ahead)
}

// window is the replicas' TPOT, TTFT and queue-time histograms merged
// over the rate window, once per cycle for every count of its misses.
type window struct {
	tpot, ttft, queue decision.Histogram
}

// mergeWindow merges the replicas' histograms.
func mergeWindow(reps []decision.ReplicaMetrics) window {
	var w window
	for _, r := range reps {
		w.tpot = w.tpot.Merge(r.TPOT)
		w.ttft = w.ttft.Merge(r.TTFT)
		w.queue = w.queue.Merge(r.QueueTime)
	}
	return w
}

// misses is the requests the replicas finished over the window and the
// share of them over the ITL target or, counted from whole buckets, the
// TTFT target (a request over both may count twice, up to all of them); a
// target of 0 counts none.
func (w window) misses(targetITLms, targetTTFTms float64) (requests, share float64) {
	requests, itl := overTarget(w.tpot, targetITLms)
	if targetITLms > 0 {
		share = itl
	}
	if targetTTFTms > 0 && w.ttft.Total() > 0 {
		share += wholeBucketsAbove(w.ttft, targetTTFTms/1000)
	}
	return requests, min(share, 1)
}

func budgetNote(spent bool) string {
	if spent {
		return " (error budget spent: every rise held)"
	}
	return ""
}

// queuedTTFT is the TTFT target the error budget counts misses against:
// only while requests wait (a backlog), when the misses are the fleet's
// to serve sooner; 0 (none counted) otherwise, when they are prompts that
// take longer to prefill than the target (fits.go), which no capacity
// buys back.
func queuedTTFT(backlog, targetTTFTms float64) float64 {
	if backlog < 1 {
		return 0
	}
	return targetTTFTms
}
