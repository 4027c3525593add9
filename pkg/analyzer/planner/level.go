package planner

import (
	"fmt"
	"time"

	"github.com/wva-project/wva/pkg/decision"
)

// The hold keeps the highest plan of the last hold (up to two hours), so
// on a day whose level falls through the afternoon it kept the noon
// bursts' fleet into the evening. Each plan is remembered with the level
// it was made at, and held scaled to the level now: a burst is held as
// the multiple of its level it was, not as the rate it reached.

// levelOf is the median arrival rate over the last levelWindow: the
// level bursts rise from, which bursts covering less than half of it
// leave as is. It is 0 (unknown) until the remembered plans cover the
// whole window.
func levelOf(plans []PlanPoint, now time.Time, cur float64) float64 {
	if len(plans) == 0 || now.Sub(plans[0].At) < levelWindow-decision.RateWindow {
		return 0
	}
	rates := []float64{cur}
	for _, p := range plans {
		if now.Sub(p.At) < levelWindow {
			rates = append(rates, p.Arrivals)
		}
	}
	return decision.Median(rates)
}

// levelWindow is how far back the level is read: an hour holds bursts of
// minutes, which do not move its median, and follows a day's curve.
const levelWindow = time.Hour

// levelRatio scales a plan made at level then to the level now: a burst
// is held as a multiple of the level it rose from, so the hold follows a
// day's fall rather than keeping its afternoon's bursts into the evening.
// It only scales down: a level risen since is covered by the plan now
// and its margin, and a plan of unknown level is held as made.
func levelRatio(then, now float64) float64 {
	if then <= 0 || now <= 0 {
		return 1
	}
	return min(1, now/then)
}

func levelNote(level float64) string {
	if level <= 0 {
		return ""
	}
	return fmt.Sprintf(" (as a multiple of the level, now %.3f req/s)", level)
}

// riseBase is the rate the rise margin is a share of: the load, but the
// level at a burst, a load over the level that was at or under it within
// a start-up delay (horizon). A load over the level for longer is the
// level rising (a day's morning), and its rises are from the load now. An
// unknown level (0) leaves the load.
func riseBase(plans []PlanPoint, now time.Time, load, level float64, horizon time.Duration) float64 {
	if level <= 0 || load <= level {
		return load
	}
	for i := len(plans) - 1; i >= 0 && now.Sub(plans[i].At) <= horizon; i-- {
		if plans[i].Arrivals <= level {
			return level
		}
	}
	return load
}
