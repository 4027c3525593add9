package sim

import (
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/sim/oracle"
	"github.com/wva-project/wva/pkg/sim/policies"
	"github.com/wva-project/wva/pkg/sim/scenario"
	"github.com/wva-project/wva/pkg/sim/simtest"
)

// TestStaticFrontier: the rows are named static:<n>x<variant>+<m>x<variant>,
// constant, at most frontierMaxRows, within 1.5x static-peak's cost, and
// their costs increase along the frontier.
func TestStaticFrontier(t *testing.T) {
	sc, tr := simtest.ShortScenario(t, scenario.ShapeBursty, 15*time.Minute, 1.5, 5)
	rep, err := Run(sc, tr, Options{Policies: []string{policies.PolicyStaticPeak, policies.PolicyStaticFrontier}})
	require.NoError(t, err)
	require.Equal(t, policies.PolicyStaticPeak, rep.Policies[0].Policy)
	peak := rep.Policies[0].Cost
	rows := rep.Policies[1:]
	require.GreaterOrEqual(t, len(rows), 3)
	assert.LessOrEqual(t, len(rows), oracle.FrontierMaxRows)
	name := regexp.MustCompile(`^static:(\d+)x` + regexp.QuoteMeta(sc.Variants[0].Name) + `\+(\d+)x` + regexp.QuoteMeta(sc.Variants[1].Name) + `$`)
	for i, r := range rows {
		assert.Regexp(t, name, r.Policy)
		assert.Zero(t, r.ScaleEvents, r.Policy)
		assert.LessOrEqual(t, r.Cost, oracle.FrontierCostFactor*peak+1e-9, r.Policy)
		if i > 0 {
			assert.Greater(t, r.Cost, rows[i-1].Cost, "%s after %s", r.Policy, rows[i-1].Policy)
		}
	}
	// More capacity costs more: the most expensive row meets the SLO at
	// least as well as the cheapest.
	assert.GreaterOrEqual(t, rows[len(rows)-1].SLOAttainment, rows[0].SLOAttainment)
}
