package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/decision/params"
	"github.com/wva-project/wva/pkg/sim/policies"
	"github.com/wva-project/wva/pkg/sim/scenario"
)

func TestFrontierFill(t *testing.T) {
	cases := []struct {
		name   string
		points []FrontierPoint
		at95   *float64
		at99   *float64
	}{
		{"never reached", []FrontierPoint{{Cost: 10, Attainment: 0.5}, {Cost: 20, Attainment: 0.9}}, nil, nil},
		{"cheapest run at each level", []FrontierPoint{{Cost: 30, Attainment: 0.999}, {Cost: 20, Attainment: 0.96}, {Cost: 25, Attainment: 0.99}, {Cost: 22, Attainment: 0.97}},
			costOf(20), costOf(25)},
		{"a dearer run reaching less does not count", []FrontierPoint{{Cost: 40, Attainment: 0.94}, {Cost: 35, Attainment: 0.95}}, costOf(35), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := Frontier{Points: tc.points}
			f.Fill()
			assert.Equal(t, tc.at95, f.CostAt95)
			assert.Equal(t, tc.at99, f.CostAt99)
		})
	}
}

// The wva sweep sets the attainment target wva plans for, and leaves the
// scenario it was given, and the yardstick, alone.
func TestSetWVAAttainment(t *testing.T) {
	base := scenario.DefaultScenario()
	run := base
	require.NoError(t, setWVAAttainment(&run, 0.95))
	r, err := run.WVAResolved()
	require.NoError(t, err)
	assert.InDelta(t, 0.95, r.SLO.Attainment, 1e-12)
	assert.InDelta(t, 0.99, run.SLO.Attainment, 1e-12, "the yardstick")
	orig, err := base.WVAResolved()
	require.NoError(t, err)
	assert.InDelta(t, 0.99, orig.SLO.Attainment, 1e-12)
}

// A sweep runs each policy at every knob value and attaches the constant
// fleets' frontier to static-peak.
func TestSweepFrontiers(t *testing.T) {
	sc := scenario.DefaultScenario()
	sc.Traffic.Limit = params.Duration(10 * time.Minute)
	trace, err := sc.LoadTraffic()
	require.NoError(t, err)
	rep, err := Run(sc, trace, Options{Policies: []string{policies.PolicyWVA, policies.PolicyKPA, policies.PolicyStaticPeak, policies.PolicyStaticFrontier}})
	require.NoError(t, err)
	require.NoError(t, SweepFrontiers(sc, trace, &rep))
	for _, p := range rep.Policies {
		switch {
		case p.Policy == policies.PolicyWVA || p.Policy == policies.PolicyKPA:
			require.NotNil(t, p.Frontier, p.Policy)
			assert.Len(t, p.Frontier.Points, 6, p.Policy)
		case p.Policy == policies.PolicyStaticPeak:
			require.NotNil(t, p.Frontier)
			assert.Greater(t, len(p.Frontier.Points), 1)
		default:
			assert.Nil(t, p.Frontier, p.Policy)
		}
	}
	// The knob really moves the policy: its ends cost differently.
	kpa := rep.Policies[1].Frontier.Points
	assert.NotEqual(t, kpa[0].Cost, kpa[len(kpa)-1].Cost)
}

// Without static-peak, the constant fleets' frontier is kept on the first
// static-frontier row, one point per row.
func TestSweepFrontiersWithoutStaticPeak(t *testing.T) {
	sc := scenario.DefaultScenario()
	sc.Traffic.Limit = params.Duration(10 * time.Minute)
	trace, err := sc.LoadTraffic()
	require.NoError(t, err)
	rep, err := Run(sc, trace, Options{Policies: []string{policies.PolicyStaticFrontier}})
	require.NoError(t, err)
	require.NoError(t, SweepFrontiers(sc, trace, &rep))
	require.Greater(t, len(rep.Policies), 1)
	f := rep.Policies[0].Frontier
	require.NotNil(t, f, rep.Policies[0].Policy)
	assert.Equal(t, StaticKnob, f.Knob)
	assert.Len(t, f.Points, len(rep.Policies))
	for _, p := range rep.Policies[1:] {
		assert.Nil(t, p.Frontier, p.Policy)
	}
}

func costOf(v float64) *float64 { return &v }
