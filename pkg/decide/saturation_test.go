package decide

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/decision"
)

// A group whose replicas are saturated scales up whatever its rate series
// say (missing, zero, or claiming spare capacity), and whatever the
// planner learned before: the shipped configuration, through Run.
func TestSaturatedGroupScalesUp(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cfg := config.NewStore().Resolve("m", "ns")
	for trial := range 500 {
		g := saturatedGroup(rng)
		var state any
		if rng.IntN(2) == 0 {
			// A prior cycle: the same fleet unsaturated, its rates claiming
			// several times the capacity it serves now.
			calm := g
			calm.Replicas = nil
			for _, r := range g.Replicas {
				r.KvCacheUsage, r.QueueLength = 0.2, 0
				r.ArrivalRate *= 4
				calm.Replicas = append(calm.Replicas, r)
			}
			prev := Default().Run(t0.Add(-30*time.Second), []GroupInput{{Group: calm, Config: cfg, Metrics: MetricsAvailable, RequestsInRetention: ptr(100.0)}})[0]
			require.NoError(t, prev.Err)
			state = prev.State
		}
		in := GroupInput{Group: g, Config: cfg, Metrics: MetricsAvailable, State: state}
		if rng.IntN(2) == 0 {
			in.RequestsInRetention = ptr(float64(rng.IntN(1000)))
		}
		res := Default().Run(t0, []GroupInput{in})[0]
		require.NoError(t, res.Err)
		var current, decided int32
		for _, v := range g.Variants {
			current += v.CurrentReplicas
		}
		for _, tg := range res.Targets {
			decided += tg.Replicas
		}
		require.Greater(t, decided, current, "trial %d: %+v\nreason: %v", trial, g, res.Targets)
	}
}

// saturatedGroup draws a group of one to three variants below their
// maxReplicas, every replica Ready and reporting, more than half of them
// saturated (KV or queue at the thresholds, or too many requests over the
// ITL target), with rate series that are missing, zero or small.
func saturatedGroup(rng *rand.Rand) decision.Group {
	g := decision.Group{ModelID: "m", Namespace: "ns"}
	if rng.IntN(2) == 0 {
		g.GatewayArrivalsReported = true
		g.GatewayArrivalRate = rng.Float64() * 2
	}
	nv := 1 + rng.IntN(3)
	for i := range nv {
		v := decision.Variant{Name: fmt.Sprintf("v%d", i), Accelerator: fmt.Sprintf("acc%d", i), Cost: float64(1 + rng.IntN(20)),
			MinReplicas: 0, CurrentReplicas: int32(1 + rng.IntN(5)), LastUpdate: t0.Add(-10 * time.Minute),
			MaxNumSeqs: int64(64 << rng.IntN(3)), MaxNumBatchedTokens: int64(2048 << rng.IntN(3))}
		v.MaxReplicas = v.CurrentReplicas + int32(1+rng.IntN(10))
		v.DesiredReplicas = v.CurrentReplicas
		g.Variants = append(g.Variants, v)
		for j := range v.CurrentReplicas {
			r := decision.ReplicaMetrics{Pod: fmt.Sprintf("%s-%d", v.Name, j), Variant: v.Name, ReadyAt: t0.Add(-time.Hour),
				NumGPUBlocks: int64(1000 << rng.IntN(5)), BlockSize: 16}
			if rng.IntN(2) == 0 {
				r.AvgInputTokens, r.AvgOutputTokens = float64(100+rng.IntN(4000)), float64(20+rng.IntN(2000))
				r.ArrivalRate = rng.Float64()
				r.AvgTTFTms, r.AvgITLms = 50+rng.Float64()*500, 5+rng.Float64()*50
			}
			switch rng.IntN(4) {
			case 0:
				r.KvCacheUsage = 0.8 + 0.2*rng.Float64()
			case 1:
				r.QueueLength = float64(5 + rng.IntN(20))
			case 2:
				r.KvCacheUsage, r.QueueLength = 0.95, float64(11+rng.IntN(5))
			default:
				// KV and queue calm, but 10-100% of its requests (0.5-5
				// req/s in the 1m window) over the 100 ms ITL target.
				rate, share := 0.5+4.5*rng.Float64(), 0.1+0.9*rng.Float64()
				r.KvCacheUsage = 0.5 * rng.Float64()
				r.TPOT = decision.Histogram{Bounds: []float64{0.05, 0.1, 0.2, math.Inf(1)},
					Counts: []float64{rate * (1 - share) / 2, rate * (1 - share), rate, rate}}
			}
			g.Replicas = append(g.Replicas, r)
		}
	}
	// One replica of a variant with two or more may be unsaturated: the
	// majority still is.
	if n := len(g.Replicas); n >= 3 {
		g.Replicas[n-1].KvCacheUsage, g.Replicas[n-1].QueueLength, g.Replicas[n-1].TPOT = 0.3, 0, decision.Histogram{}
	}
	return g
}
