package planner

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The backlog left one horizon ahead: what grows until the replicas
// already starting serve, less what they drain from then on.
func TestProjectedBacklog(t *testing.T) {
	const horizon = 4 * time.Minute
	cases := []struct {
		name    string
		backlog float64
		growth  float64
		batches []startingBatch
		want    float64
	}{
		{name: "nothing starting: the backlog and its growth", backlog: 600, growth: 5, want: 600 + 5*240},
		{name: "nothing starting, not growing", backlog: 600, want: 600},
		{name: "starting replicas drain it before the horizon", backlog: 600, growth: 5,
			batches: []startingBatch{{in: time.Minute, rate: 20}}, want: 0},
		{name: "starting replicas drain part of it", backlog: 3000, growth: 10,
			batches: []startingBatch{{in: 2 * time.Minute, rate: 15}}, want: 3000 + 10*120 - 5*120},
		{name: "replicas Ready after the horizon drain nothing", backlog: 600, growth: 5,
			batches: []startingBatch{{in: 5 * time.Minute, rate: 100}}, want: 600 + 5*240},
		{name: "batches in any order", backlog: 3000, growth: 10, want: 3000 + 10*60 + 5*120 - 5*60,
			batches: []startingBatch{{in: 3 * time.Minute, rate: 10}, {in: time.Minute, rate: 5}}},
		{name: "drained before a later batch: never below zero", backlog: 100, growth: 0,
			batches: []startingBatch{{in: 0, rate: 10}, {in: 3 * time.Minute, rate: 0}}, want: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.InDelta(t, tc.want, projectedBacklog(tc.backlog, tc.growth, tc.batches, horizon), 1e-6)
		})
	}
}

// A backlog that grows while the replicas ordered for it start is not
// ordered for again when they will have drained it before a replica
// ordered now serves; replicas overdue (stuck Pending) are not counted
// on, and the backlog and its growth are ordered.
func TestStartingReplicasDrainTheBacklog(t *testing.T) {
	g := fleet(2, 0, 12)
	g.SchedulerQueueSize = 320
	_, first, st := run(t, g, nil)
	require.Greater(t, total(first), int32(2), "the backlog orders replicas: %s", first.Reason)

	next := func(orderedAgo time.Duration) (Analysis, int32) {
		g := fleet(2, 0, 12)
		g.Now = t0.Add(30 * time.Second)
		g.SchedulerQueueSize = 560 // grew by 8 req/s
		for i := range g.Variants {
			v := &g.Variants[i]
			v.CurrentReplicas = first.PlannedReplicas[v.Name]
			v.LastUpdate = g.Now.Add(-orderedAgo)
		}
		an, sig, _ := run(t, g, st)
		return an, total(sig)
	}
	an, _ := next(150 * time.Second)
	assert.LessOrEqual(t, an.Staffed, an.Supply, "the H100 ordered 150 s ago is Ready within 30 s and drains the backlog: nothing more to order")
	an, n := next(10 * time.Minute)
	assert.Greater(t, an.Staffed, an.Supply, "ordered 10 min ago and still not Ready: not counted on")
	assert.Greater(t, n, total(first), "the growth is ordered")
}
