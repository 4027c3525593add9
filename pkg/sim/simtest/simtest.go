// Package simtest holds helpers the simulator's packages share in their
// tests.
package simtest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/decision/params"
	"github.com/wva-project/wva/pkg/sim/scenario"
	"github.com/wva-project/wva/pkg/sim/trace"
)

// ShortScenario is the embedded default scenario with a shorter synthetic
// trace of the given shape, duration and rates (req/s).
func ShortScenario(t testing.TB, shape string, d time.Duration, base, peak float64) (scenario.Scenario, trace.Trace) {
	t.Helper()
	sc := scenario.DefaultScenario()
	syn := *sc.Traffic.Synthetic
	syn.Shape, syn.Duration, syn.BaseRate, syn.PeakRate = shape, params.Duration(d), base, peak
	sc.Traffic.Synthetic = &syn
	require.NoError(t, sc.Validate())
	tr, err := sc.LoadTraffic()
	require.NoError(t, err)
	return sc, tr
}
