package decision

import (
	"fmt"
	"time"
)

// RecentReady is what a Ready transition within MetricsWindow leaves
// unsettled: for that window the older replicas' max_over_time readings
// still hold the load from before the new replica served, the peak that
// asked for it. The analyzers' settling rules judge a scale-up on the
// replicas Ready since instead.
type RecentReady struct {
	// Variant is the variant whose replica turned Ready last, Since how
	// long ago.
	Variant string
	Since   time.Duration
	// Replicas are the reporting replicas Ready within the window.
	Replicas []ReplicaMetrics
}

// RecentlyReady finds the newest Ready transition within MetricsWindow
// among the variants that in selects (every variant when in is nil), and the
// replicas of those variants Ready since the window began; ok is false
// when there is none or no clock. It reads only Ready times, so every
// adapter (a restarted one, a new leader) finds the same.
func RecentlyReady(g Group, in func(variant string) bool) (r RecentReady, ok bool) {
	if g.Now.IsZero() {
		return r, false
	}
	fresh := func(at time.Time) bool { return !at.IsZero() && g.Now.Sub(at) < MetricsWindow }
	selected := func(name string) bool { return in == nil || in(name) }
	var newest time.Time
	for _, v := range g.Variants {
		if selected(v.Name) && fresh(v.LastReadyAt) && (!ok || v.LastReadyAt.After(newest)) {
			r.Variant, newest, ok = v.Name, v.LastReadyAt, true
		}
	}
	if !ok {
		return r, false
	}
	r.Since = g.Now.Sub(newest)
	for _, rep := range g.Replicas {
		if selected(rep.Variant) && fresh(rep.ReadyAt) {
			r.Replicas = append(r.Replicas, rep)
		}
	}
	return r, true
}

// Why says what is unsettled, for a decision reason.
func (r RecentReady) Why() string {
	return fmt.Sprintf("a replica of %s turned Ready %s ago, within the %s metrics window, and older replicas' readings still hold the load from before it served",
		r.Variant, r.Since.Round(time.Second), MetricsWindow)
}

// NoneReporting is the settling verdict while no replica Ready within the
// window reports metrics yet.
func (r RecentReady) NoneReporting() string {
	return r.Why() + "; no replica Ready since reports metrics yet, no scale-up"
}
