package report

import (
	"bytes"
	"encoding/csv"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/decision/params"
	"github.com/wva-project/wva/pkg/sim"
	"github.com/wva-project/wva/pkg/sim/policies"
	"github.com/wva-project/wva/pkg/sim/scenario"
	"github.com/wva-project/wva/pkg/sim/simtest"
)

// The timeline CSV has a row per scrape of every policy but the constant
// fleets of the frontier, and counts the requests over each target: with
// a TTFT target no request meets, every finished one.
func TestRenderTimelineCSV(t *testing.T) {
	sc, tr := simtest.ShortScenario(t, scenario.ShapeSpike, 15*time.Minute, 1.5, 5)
	sc.SLO.TTFT = params.Duration(time.Millisecond)
	rep, err := sim.Run(sc, tr, sim.Options{Policies: []string{policies.PolicyWVA, policies.PolicyStaticFrontier}})
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, RenderTimelineCSV(&out, rep))
	rows, err := csv.NewReader(&out).ReadAll()
	require.NoError(t, err)
	require.NotEmpty(t, rows)
	head := rows[0]
	col := map[string]int{}
	for i, h := range head {
		col[h] = i
	}
	for _, v := range rep.Variants {
		assert.Contains(t, col, "replicas_"+v.Name)
		assert.Contains(t, col, "ready_"+v.Name)
	}
	cell := func(r []string, name string) int {
		i, ok := col[name]
		require.True(t, ok, "column %s", name)
		n, err := strconv.Atoi(r[i])
		require.NoError(t, err, "column %s", name)
		return n
	}
	byPolicy := map[string]int{}
	finished, missed, dispatched := map[string]int{}, map[string]int{}, map[string]int{}
	for _, r := range rows[1:] {
		require.Len(t, r, len(head))
		p := r[col["policy"]]
		byPolicy[p]++
		finished[p] += cell(r, "finished")
		missed[p] += cell(r, "missed_ttft")
		// The variants' columns split the row's totals.
		split := []string{"running", "finished", "missed_ttft", "missed_itl"}
		sums := map[string]int{}
		for _, v := range rep.Variants {
			for _, c := range split {
				sums[c] += cell(r, c+"_"+v.Name)
			}
			dispatched[p] += cell(r, "dispatched_"+v.Name)
		}
		for _, c := range split {
			assert.Equal(t, cell(r, c), sums[c], "%s split by variant at %ss", c, r[col["seconds"]])
		}
	}
	assert.Equal(t, map[string]int{policies.PolicyWVA: len(rep.Policies[0].Timeline)}, byPolicy, "no frontier rows")
	wva := rep.Policies[0]
	require.Equal(t, policies.PolicyWVA, wva.Policy)
	assert.Greater(t, finished[policies.PolicyWVA], wva.Requests/2)
	assert.LessOrEqual(t, finished[policies.PolicyWVA], wva.Requests)
	assert.Equal(t, finished[policies.PolicyWVA], missed[policies.PolicyWVA])
	assert.GreaterOrEqual(t, dispatched[policies.PolicyWVA], finished[policies.PolicyWVA], "every finished request was sent to a pod")
}
