package planner

import (
	"github.com/wva-project/wva/pkg/analyzer/saturation"
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
)

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
