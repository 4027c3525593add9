package servegen

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/sim/trace"
)

const window = 600 * time.Second

func loadFixture(t *testing.T) Pool {
	t.Helper()
	pool, err := Load(filepath.Join("testdata", "pool"))
	require.NoError(t, err)
	return pool
}

func TestLoadFixture(t *testing.T) {
	pool := loadFixture(t)
	assert.Equal(t, "pool", pool.Name)
	assert.Equal(t, 3600*time.Second, pool.End())
	require.Len(t, pool.Clients, 3)
	assert.Equal(t, []int{0, 7, 12}, []int{pool.Clients[0].ID, pool.Clients[1].ID, pool.Clients[2].ID})
	assert.Equal(t, Window{Rate: 2, Pattern: Gamma, Shape: 0.44, Scale: 1.1}, pool.Clients[0].Windows[3])
	assert.Equal(t, Window{}, pool.Clients[0].Windows[2])
	assert.Equal(t, Window{Rate: 3, Pattern: Weibull, Shape: 1.2, Scale: 0.3}, pool.Clients[1].Windows[4])
	// Client 7's "{}" at 0 is skipped; its datasets are sorted by time.
	require.Len(t, pool.Clients[1].Data, 2)
	assert.Equal(t, []time.Duration{1200 * time.Second, 2400 * time.Second}, []time.Duration{pool.Clients[1].Data[0].At, pool.Clients[1].Data[1].At})
	assert.Empty(t, pool.Clients[2].Data, "client 12 has no dataset file")
	assert.Equal(t, Dist{Tokens: []int32{10, 11}, Cum: []float64{0.25, 1}}, pool.Clients[0].Data[0].Output)
}

// windowCounts counts a trace's requests per 600 s window and per input
// length (which names the client and dataset in the fixture).
func windowCounts(tr trace.Trace) (perWindow map[int]int, inputs map[int]map[int32]int) {
	perWindow, inputs = map[int]int{}, map[int]map[int32]int{}
	for _, r := range tr.Requests {
		w := int(r.Arrival / window)
		perWindow[w]++
		if inputs[w] == nil {
			inputs[w] = map[int32]int{}
		}
		inputs[w][r.Input]++
	}
	return perWindow, inputs
}

// TestGenerateShape: each window's requests follow the aggregate rate of all
// clients (client 12's too), scaled to the mean rate; only the clients with
// data send, from the dataset in force; n = ceil(rate x window) arrivals per
// client, the last of which may fall on the window's end and be dropped.
func TestGenerateShape(t *testing.T) {
	pool := loadFixture(t)
	withoutTraceOnly := pool
	withoutTraceOnly.Clients = pool.Clients[:2]
	for _, tc := range []struct {
		name      string
		pool      Pool
		from, to  time.Duration
		meanRate  float64
		aggregate []float64 // per window of the span
		senders   []int     // clients with data and a pattern, per window
		inputs    []map[int32]bool
	}{
		{
			name: "whole hour", pool: pool, from: 0, to: time.Hour, meanRate: 5,
			aggregate: []float64{2, 4, 2, 3, 8, 1},
			senders:   []int{1, 1, 1, 2, 2, 2},
			inputs: []map[int32]bool{{100: true}, {100: true}, {200: true}, {100: true, 200: true},
				{100: true, 300: true}, {100: true, 300: true}},
		},
		{
			name: "without the client that has no dataset", pool: withoutTraceOnly, from: 0, to: time.Hour, meanRate: 5,
			aggregate: []float64{1, 2, 1, 3, 4, 1},
			senders:   []int{1, 1, 1, 2, 2, 2},
		},
		{
			name: "span cut inside windows", pool: pool, from: 900 * time.Second, to: 2700 * time.Second, meanRate: 2,
			// windows [900,1200) [1200,1800) [1800,2400) [2400,2700), re-based on 900 s
			aggregate: []float64{4, 2, 3, 8},
			senders:   []int{1, 1, 2, 2},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := Generate(tc.pool, tc.from, tc.to, tc.meanRate, 1)
			require.NoError(t, err)
			// The span's windows, cut to it.
			var bounds []time.Duration
			for s := tc.from; s < tc.to; s = (s/window + 1) * window {
				bounds = append(bounds, s-tc.from)
			}
			bounds = append(bounds, tc.to-tc.from)
			require.Len(t, bounds, len(tc.aggregate)+1)
			var weighted float64
			for i, a := range tc.aggregate {
				weighted += a * (bounds[i+1] - bounds[i]).Seconds()
			}
			scale := tc.meanRate * (tc.to - tc.from).Seconds() / weighted
			counts := make([]int, len(tc.aggregate))
			inputs := make([]map[int32]bool, len(tc.aggregate))
			for _, r := range tr.Requests {
				require.GreaterOrEqual(t, r.Arrival, time.Duration(0))
				require.Less(t, r.Arrival, tc.to-tc.from)
				i := 0
				for r.Arrival >= bounds[i+1] {
					i++
				}
				counts[i]++
				if inputs[i] == nil {
					inputs[i] = map[int32]bool{}
				}
				inputs[i][r.Input] = true
			}
			for i, a := range tc.aggregate {
				want := a * scale * (bounds[i+1] - bounds[i]).Seconds()
				// ceil per sender, minus at most one dropped at the end each.
				assert.LessOrEqual(t, float64(counts[i]), want+float64(tc.senders[i]), "window %d", i)
				assert.GreaterOrEqual(t, float64(counts[i]), want-float64(tc.senders[i]), "window %d", i)
			}
			if tc.inputs != nil {
				assert.Equal(t, tc.inputs, inputs)
			}
			mean := float64(len(tr.Requests)) / (tc.to - tc.from).Seconds()
			assert.InDelta(t, tc.meanRate, mean, 0.01*tc.meanRate)
		})
	}
}

// TestGenerateTokens: token counts follow the pdf, one uniform draw per
// request shared by prompt and output (ServeGen's sampling), 0 clipped to 1.
func TestGenerateTokens(t *testing.T) {
	in := Dist{Tokens: []int32{0, 50, 400, 2000}, Cum: []float64{0.1, 0.5, 0.9, 1}}
	out := Dist{Tokens: []int32{5, 60, 700}, Cum: []float64{0.3, 0.8, 1}}
	pool := Pool{Name: "tokens", Starts: []time.Duration{0, window}, Clients: []Client{{
		ID:      1,
		Windows: []Window{{Rate: 1, Pattern: Gamma, Shape: 1, Scale: 1}, {Rate: 1, Pattern: Weibull, Shape: 2, Scale: 1}},
		Data:    []Dataset{{At: 0, Input: in, Output: out}},
	}}}
	tr, err := Generate(pool, 0, 2*window, 40, 7)
	require.NoError(t, err)
	n := float64(len(tr.Requests))
	require.Greater(t, n, 40000.0)
	pairs := map[[2]int32]float64{}
	for _, r := range tr.Requests {
		pairs[[2]int32{r.Input, r.Output}]++
	}
	// u in (0, 0.1] -> (0->1, 5); (0.1, 0.3] -> (50, 5); (0.3, 0.5] -> (50, 60);
	// (0.5, 0.8] -> (400, 60); (0.8, 0.9] -> (400, 700); (0.9, 1) -> (2000, 700).
	want := map[[2]int32]float64{{1, 5}: 0.1, {50, 5}: 0.2, {50, 60}: 0.2, {400, 60}: 0.3, {400, 700}: 0.1, {2000, 700}: 0.1}
	require.Len(t, pairs, len(want), "only the pairs one shared draw can give: %v", pairs)
	for p, f := range want {
		assert.InDelta(t, f, pairs[p]/n, 0.01, "pair %v", p)
	}
}

func TestGenerateDeterministic(t *testing.T) {
	pool := loadFixture(t)
	a, err := Generate(pool, 0, time.Hour, 3, 1)
	require.NoError(t, err)
	b, err := Generate(pool, 0, time.Hour, 3, 1)
	require.NoError(t, err)
	c, err := Generate(pool, 0, time.Hour, 3, 2)
	require.NoError(t, err)
	assert.Equal(t, a, b)
	assert.NotEqual(t, a.Requests, c.Requests)
	assert.Equal(t, "servegen pool 0s-1h0m0s", a.Name)
}

func TestGenerateErrors(t *testing.T) {
	pool := loadFixture(t)
	empty := pool
	empty.Clients = nil
	for _, tc := range []struct {
		name     string
		pool     Pool
		from, to time.Duration
		rate     float64
		want     string
	}{
		{"from after to", pool, time.Hour, 0, 1, "span [1h0m0s, 0s): want 0 <= from < to"},
		{"negative from", pool, -time.Second, time.Hour, 1, "want 0 <= from < to"},
		{"past the data", pool, 0, 2 * time.Hour, 1, "span [0s, 2h0m0s): the data pool covers [0, 1h0m0s)"},
		{"zero rate", pool, 0, time.Hour, 0, "mean rate 0: must be a finite number > 0"},
		{"NaN rate", pool, 0, time.Hour, math.NaN(), "mean rate NaN"},
		{"too many requests", pool, 0, time.Hour, 300, "mean rate 300 over 1h0m0s makes 1080000 requests: at most 1000000 are accepted"},
		{"no requests in the span", pool, 1200 * time.Second, 1800 * time.Second, 1, "no requests"},
		{"no clients", empty, 0, time.Hour, 1, "the data pool has no requests in [0s, 1h0m0s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.pool
			if tc.name == "no requests in the span" {
				// Only client 7 has a pattern in [1200,1800): without it, none.
				p.Clients = []Client{pool.Clients[0], {ID: 12, Windows: make([]Window, 6)}}
			}
			_, err := Generate(p, tc.from, tc.to, tc.rate, 1)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

// TestSamplers: Gamma (Marsaglia-Tsang, boosted below shape 1) and Weibull
// (inversion) draws have the distributions' means and variances.
func TestSamplers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		w              Window
		mean, variance float64
	}{
		{Window{Pattern: Gamma, Shape: 0.3, Scale: 2}, 0.6, 1.2},
		{Window{Pattern: Gamma, Shape: 1, Scale: 1}, 1, 1},
		{Window{Pattern: Gamma, Shape: 5, Scale: 0.5}, 2.5, 1.25},
		{Window{Pattern: Weibull, Shape: 1, Scale: 3}, 3, 9},
		{Window{Pattern: Weibull, Shape: 2, Scale: 1},
			math.Gamma(1.5), math.Gamma(2) - math.Gamma(1.5)*math.Gamma(1.5)},
		{Window{Pattern: Weibull, Shape: 0.5, Scale: 1}, 2, 20},
	} {
		const n = 400_000
		var sum, sq float64
		for range n {
			x := draw(rng, tc.w)
			require.GreaterOrEqual(t, x, 0.0)
			sum += x
			sq += x * x
		}
		mean := sum / n
		assert.InDelta(t, tc.mean, mean, 0.01*tc.mean, "%+v mean", tc.w)
		assert.InDelta(t, tc.variance, sq/n-mean*mean, 0.05*tc.variance, "%+v variance", tc.w)
	}
}

func TestLoadErrors(t *testing.T) {
	const trace2 = "0,1,1,Gamma,1,1\n600,1,1,Gamma,1,1\n"
	const data = `{"0": {"input_tokens": "{1: 1.0}", "output_tokens": "{1: 1.0}"}}`
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"no traces", map[string]string{"notes.txt": "x"}, "no chunk-<N>-trace.csv files"},
		{"bad file name", map[string]string{"chunk-x-trace.csv": trace2}, "chunk-x-trace.csv: want chunk-<client number>-trace.csv or -dataset.json"},
		{"dataset without trace", map[string]string{"chunk-0-trace.csv": trace2, "chunk-1-dataset.json": data}, "chunk-1-dataset.json: no chunk-1-trace.csv beside it"},
		{"fields", map[string]string{"chunk-0-trace.csv": "0,1,1,Gamma,1\n"}, "chunk-0-trace.csv: line 1: 5 fields, want 6: timestamp,rate,cv,pattern,shape,scale"},
		{"timestamp", map[string]string{"chunk-0-trace.csv": "0,1,1,Gamma,1,1\nx,1,1,Gamma,1,1\n"}, `chunk-0-trace.csv: line 2, column 1 (timestamp): "x" is not an integer number of seconds`},
		{"timestamps not ascending", map[string]string{"chunk-0-trace.csv": "600,1,1,Gamma,1,1\n0,1,1,Gamma,1,1\n"}, "line 2, column 1 (timestamp): 0 does not follow the previous timestamp 600"},
		{"negative rate", map[string]string{"chunk-0-trace.csv": "0,-1,1,Gamma,1,1\n600,1,1,Gamma,1,1\n"}, `line 1, column 2 (rate): "-1" is not a finite number >= 0`},
		{"NaN cv", map[string]string{"chunk-0-trace.csv": "0,1,NaN,Gamma,1,1\n600,1,1,Gamma,1,1\n"}, `line 1, column 3 (cv): "NaN"`},
		{"unknown pattern", map[string]string{"chunk-0-trace.csv": "0,1,1,Poisson,1,1\n600,1,1,Gamma,1,1\n"}, `line 1, column 4 (pattern): "Poisson": want Gamma, Weibull or empty`},
		{"zero shape", map[string]string{"chunk-0-trace.csv": "0,1,1,Weibull,0,1\n600,1,1,Gamma,1,1\n"}, `line 1, column 5 (shape): "0": the shape must be > 0`},
		{"one window", map[string]string{"chunk-0-trace.csv": "0,1,1,Gamma,1,1\n"}, "1 windows: at least 2 are needed"},
		{"different windows", map[string]string{"chunk-0-trace.csv": trace2, "chunk-1-trace.csv": "0,1,1,Gamma,1,1\n300,1,1,Gamma,1,1\n"}, "chunk-1-trace.csv: line 2: timestamp 300, where the first client has 600: want the same windows than chunk-0-trace.csv"},
		{"fewer windows", map[string]string{"chunk-0-trace.csv": trace2, "chunk-1-trace.csv": trace2 + "1200,1,1,Gamma,1,1\n"}, "chunk-1-trace.csv: 3 windows: want the same windows (2)"},
		{"dataset not JSON", map[string]string{"chunk-0-trace.csv": trace2, "chunk-0-dataset.json": "{\n\"0\": [\n"}, "chunk-0-dataset.json: line 2: [ where { is expected"},
		{"dataset key", map[string]string{"chunk-0-trace.csv": trace2, "chunk-0-dataset.json": `{"soon": {}}`}, `chunk-0-dataset.json: line 1: key "soon" is not an integer number of seconds`},
		{"dataset not a dict", map[string]string{"chunk-0-trace.csv": trace2, "chunk-0-dataset.json": `{"0": {"input_tokens": "[1, 2]", "output_tokens": "{1: 1.0}"}}`}, `line 1: 0: input_tokens: "[1, 2]" is not a {tokens: probability} dict`},
		{"dataset tokens", map[string]string{"chunk-0-trace.csv": trace2, "chunk-0-dataset.json": "{\n\"0\": {\"input_tokens\": \"{1.5: 1.0}\",\n \"output_tokens\": \"{1: 1.0}\"}}"}, `chunk-0-dataset.json: line 2: 0: input_tokens: tokens "1.5" is not an integer`},
		{"dataset probability", map[string]string{"chunk-0-trace.csv": trace2, "chunk-0-dataset.json": `{"0": {"input_tokens": "{1: 1.5}", "output_tokens": "{1: 1.0}"}}`}, `input_tokens: probability " 1.5" of 1 tokens is not a number in [0, 1]`},
		{"dataset sum", map[string]string{"chunk-0-trace.csv": trace2, "chunk-0-dataset.json": `{"0": {"input_tokens": "{1: 0.5, 2: 0.4}", "output_tokens": "{1: 1.0}"}}`}, "input_tokens: the probabilities sum to 0.9, want 1"},
		{"dataset duplicate tokens", map[string]string{"chunk-0-trace.csv": trace2, "chunk-0-dataset.json": `{"0": {"input_tokens": "{1: 0.5, 1: 0.5}", "output_tokens": "{1: 1.0}"}}`}, "input_tokens: 1 tokens appear twice"},
		{"dataset missing output", map[string]string{"chunk-0-trace.csv": trace2, "chunk-0-dataset.json": `{"0": {"input_tokens": "{1: 1.0}"}}`}, "0: want both input_tokens and output_tokens"},
		{"dataset value not a string", map[string]string{"chunk-0-trace.csv": trace2, "chunk-0-dataset.json": `{"0": {"input_tokens": 5}}`}, `0: "input_tokens" is not a string`},
		{"dataset trailing data", map[string]string{"chunk-0-trace.csv": trace2, "chunk-0-dataset.json": data + "{}"}, "data after the object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, text := range tc.files {
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
			}
			_, err := Load(dir)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestLoadBounds: an oversized file is refused before it is held.
func TestLoadBounds(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "chunk-0-trace.csv"))
	require.NoError(t, err)
	require.NoError(t, f.Truncate(maxTraceBytes+1))
	require.NoError(t, f.Close())
	_, err = Load(dir)
	assert.ErrorContains(t, err, "chunk-0-trace.csv: larger than 16 MiB")
}
