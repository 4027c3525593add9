package main

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/hack/benchreport/workloads"
	"github.com/wva-project/wva/pkg/sim"
	"github.com/wva-project/wva/pkg/sim/policies"
)

// Every workload keeps its own report: no two names share a file.
func TestReportFilesDistinct(t *testing.T) {
	seen := map[string]string{}
	for _, s := range sets {
		for _, w := range s.list {
			f := file("d", w.Name)
			require.NotContains(t, seen, f, "%q and %q", w.Name, seen[f])
			seen[f] = w.Name
		}
	}
	assert.Len(t, seen, len(workloads.Benchmark)+len(workloads.HeldOut)+len(seeded()))
}

// The seeds set draws each shape with seeds the other sets do not use.
func TestSeededDrawsOtherSeeds(t *testing.T) {
	used := map[string]bool{"1": true} // the scenario's own, where none is given
	for _, w := range append(slices.Clone(workloads.Benchmark), workloads.HeldOut...) {
		if i := slices.Index(w.Args, "--seed"); i >= 0 {
			used[w.Args[i+1]] = true
		}
	}
	ws := seeded()
	require.Len(t, ws, 5*seedsPerShape)
	for _, w := range ws {
		i := slices.Index(w.Args, "--seed")
		require.GreaterOrEqual(t, i, 0, w.Name)
		assert.False(t, used[w.Args[i+1]], "%s draws a seed another set uses", w.Name)
		assert.False(t, w.Long, w.Name)
	}
}

func write(t *testing.T, dir, name string, cost, attainment float64, events int) {
	t.Helper()
	rep := sim.Report{Policies: []sim.PolicySummary{
		{Policy: policies.PolicyOracle, Cost: 1},
		{Policy: policies.PolicyWVA, Cost: cost, SLOAttainment: attainment, ScaleEvents: events},
	}}
	b, err := json.Marshal(rep)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file(dir, name), b, 0o644))
}

// The comparison reads wva's row, caps attainment at the SLO's 99% and
// summarizes each set over the workloads both runs hold.
func TestCompareRuns(t *testing.T) {
	base, next := t.TempDir(), t.TempDir()
	a, b := workloads.Benchmark[0].Name, workloads.Benchmark[1].Name
	write(t, base, a, 100, 0.995, 3)
	write(t, next, a, 80, 0.999, 2) // cheaper; attainment over the cap either way
	write(t, base, b, 100, 0.90, 9)
	write(t, next, b, 125, 0.95, 9) // dearer, 5 points more
	held := workloads.HeldOut[0].Name
	write(t, base, held, 50, 0.99, 1) // in one run only: left out

	var out bytes.Buffer
	require.NoError(t, compareRuns(&out, base, next))
	got := out.String()
	assert.Contains(t, got, "| "+a+" | 100.0, 99.50% | 80.0, 99.90% | x0.800 | +0.00 | 3 -> 2 |")
	assert.Contains(t, got, "| "+b+" | 100.0, 90.00% | 125.0, 95.00% | x1.250 | +5.00 | 9 -> 9 |")
	// sqrt(0.8 x 1.25) = 1; (0 + 5) / 2 points.
	assert.Contains(t, got, "benchmark: 2 workloads; cost x1.0000 (geometric mean), SLO met +2.500 points on average (capped at 99%); 0 lose attainment, 1 cost more at no less, 1 cost less at no less")
	assert.Contains(t, got, "held-out: no workload in both runs")
	assert.NotContains(t, got, held)

	write(t, next, held, 50, 0.97, 1)
	out.Reset()
	require.NoError(t, compareRuns(&out, base, next))
	assert.Contains(t, out.String(), "held-out: 1 workloads; cost x1.0000 (geometric mean), SLO met -2.000 points on average (capped at 99%); 1 lose attainment")
}
