package calibrate

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// closedForm is a model with a known answer: a replica whose prompt is one
// step and whose decode steps carry every sequence's KV.
func closedForm(p Params, pt Point) (Predicted, error) {
	in, out, c := int32(pt.InputTokens), int32(pt.OutputTokens), pt.Concurrency
	step := func(batched, kv float64) float64 {
		if p.Overhead > 0 {
			return p.Overhead + math.Max(p.Alpha+p.Gamma*kv, p.Beta*batched)
		}
		return p.Alpha + p.Beta*batched + p.Gamma*kv
	}
	kv := float64(c) * (float64(in) + float64(out)/2)
	itl := step(float64(c), kv)
	ttft := step(float64(in), kv)
	e2e := ttft + float64(out-1)*itl
	return Predicted{TTFTMs: ttft, ITLMs: itl, OutputTokensPerSecond: float64(c) * float64(out) / e2e * 1000}, nil
}

// nimShaped is what closedForm with p measures at NIM's 5000/500 points
// (concurrency 1, 5, 25, 50).
func nimShaped(t *testing.T, p Params) []Point {
	t.Helper()
	var points []Point
	for i, c := range []int{1, 5, 25, 50} {
		pred, err := closedForm(p, Point{InputTokens: 5000, OutputTokens: 500, Concurrency: c})
		require.NoError(t, err)
		points = append(points, Point{Source: fmt.Sprintf("p#%d", i+1), Concurrency: c, InputTokens: 5000, OutputTokens: 500,
			TTFTMs: pred.TTFTMs, ITLMs: pred.ITLMs, OutputTokensPerSecond: pred.OutputTokensPerSecond})
	}
	return points
}

func TestFitRecoversKnownParameters(t *testing.T) {
	for _, want := range []Params{
		{Alpha: 18.4, Beta: 0.0776, Gamma: 2.45e-5},
		{Alpha: 28.3, Beta: 0.1048, Gamma: 4.74e-5},
		{Alpha: 6, Beta: 0.02, Gamma: 1e-6},
		{Overhead: 8.1, Alpha: 10.5, Beta: 0.0798, Gamma: 2e-5},
	} {
		t.Run(fmt.Sprintf("%+v", want), func(t *testing.T) {
			points := nimShaped(t, want)
			// The 500-token prompt tells a roofline's overhead from its
			// weight reads.
			pred, err := closedForm(want, Point{InputTokens: 500, OutputTokens: 2000, Concurrency: 1})
			require.NoError(t, err)
			points = append(points, Point{Source: "p#5", Concurrency: 1, InputTokens: 500, OutputTokens: 2000,
				TTFTMs: pred.TTFTMs, ITLMs: pred.ITLMs, OutputTokensPerSecond: pred.OutputTokensPerSecond})
			got, err := Fit(points, closedForm, want.Overhead > 0)
			require.NoError(t, err)
			assert.InEpsilon(t, want.Overhead+1, got.Params.Overhead+1, 0.01)
			assert.InEpsilon(t, want.Alpha, got.Params.Alpha, 0.01)
			assert.InEpsilon(t, want.Beta, got.Params.Beta, 0.01)
			assert.InEpsilon(t, want.Gamma, got.Params.Gamma, 0.02)
			assert.Less(t, got.Worst(), 0.005)
			assert.Len(t, got.Points, 5)
		})
	}
}

func TestFitNeedsPoints(t *testing.T) {
	_, err := Fit(nil, closedForm, false)
	require.Error(t, err)
}

func TestFitReportsTheModelsFailure(t *testing.T) {
	failing := func(Params, Point) (Predicted, error) {
		return Predicted{}, fmt.Errorf("exceeds the KV cache")
	}
	_, err := Fit([]Point{{Source: "f#1", Concurrency: 1, InputTokens: 100, OutputTokens: 100, TTFTMs: 1, ITLMs: 1, OutputTokensPerSecond: 1}}, failing, false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "f#1: exceeds the KV cache")
}

// A point the model cannot reproduce is not left as the fit's outlier when
// spreading its error over the others keeps every point closer: the fit
// narrows the worst point, which is what a tolerance per point accepts.
func TestFitNarrowsTheWorstPoint(t *testing.T) {
	want := Params{Alpha: 18.4, Beta: 0.0776, Gamma: 2.45e-5}
	points := nimShaped(t, want)
	// Concurrency 5 measured a third more TTFT than the model can give it
	// beside concurrency 1 (as NIM's table does).
	points[1].TTFTMs *= 1.35
	got, err := Fit(points, closedForm, false)
	require.NoError(t, err)
	// Least squares leaves concurrency 5 about 20% short; split evenly with
	// concurrency 1 the two are within (1.35-1)/(1.35+1) = 14.9%.
	assert.Less(t, got.Worst(), 0.155)
	assert.Greater(t, got.Points[0].TTFTError, 0.1, "concurrency 1 takes its share")
	assert.Less(t, got.Points[1].TTFTError, -0.1)
}
