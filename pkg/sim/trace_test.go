package sim

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/config"
)

func TestParseTrace(t *testing.T) {
	tests := []struct {
		name    string
		csv     string
		want    []Request
		wantErr string // substring; the line and column must be named
	}{
		{
			name: "azure format, relative arrivals",
			csv: "TIMESTAMP,ContextTokens,GeneratedTokens\n" +
				"2023-11-16 18:15:46.6805900,374,44\n" +
				"2023-11-16 18:15:50.9951690,396,109\n",
			want: []Request{{0, 374, 44}, {4314579000, 396, 109}},
		},
		{
			name: "numeric seconds, unsorted, header case and spaces, zero output counts as one",
			csv:  "timestamp, contexttokens ,GENERATEDTOKENS\n10.5,100,0\n2,50,5\n\n",
			want: []Request{{0, 50, 5}, {8500 * time.Millisecond, 100, 1}},
		},
		{
			name:    "empty file",
			csv:     "",
			wantErr: "line 1: empty trace",
		},
		{
			name:    "header only",
			csv:     "TIMESTAMP,ContextTokens,GeneratedTokens\n",
			wantErr: "line 2: trace has a header but no requests",
		},
		{
			name:    "wrong header column",
			csv:     "TIMESTAMP,Prompt,GeneratedTokens\n1,2,3\n",
			wantErr: `line 1, column 2 (header): column is "Prompt", want "ContextTokens"`,
		},
		{
			name:    "bad timestamp",
			csv:     "TIMESTAMP,ContextTokens,GeneratedTokens\n1,2,3\nyesterday,2,3\n",
			wantErr: `line 3, column 1 (TIMESTAMP): "yesterday" is neither a date-time`,
		},
		{
			name:    "negative tokens",
			csv:     "TIMESTAMP,ContextTokens,GeneratedTokens\n1,-2,3\n",
			wantErr: `line 2, column 2 (ContextTokens): "-2" is not an integer in [0, 10000000]`,
		},
		{
			name:    "non-numeric output",
			csv:     "TIMESTAMP,ContextTokens,GeneratedTokens\n1,2,3\n2,2,3\n3,4,x\n",
			wantErr: `line 4, column 3 (GeneratedTokens): "x" is not an integer`,
		},
		{
			name:    "missing column",
			csv:     "TIMESTAMP,ContextTokens,GeneratedTokens\n1,2\n",
			wantErr: "line 2: has 2 columns, want 3",
		},
		{
			name:    "bare quote",
			csv:     "TIMESTAMP,ContextTokens,GeneratedTokens\n1,2\"x,3\n",
			wantErr: "line 2, column 4 (csv)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := ParseTrace(strings.NewReader(tt.csv), "t")
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				var te *TraceError
				assert.True(t, errors.As(err, &te), "error is a *TraceError")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, tr.Requests)
		})
	}
}

func TestReshape(t *testing.T) {
	tr := Trace{Name: "t"}
	for i := range 1000 {
		tr.Requests = append(tr.Requests, Request{Arrival: time.Duration(i) * time.Second, Input: 10, Output: 2})
	}
	half, err := tr.Reshape(0.5, 1, 0, 1)
	require.NoError(t, err)
	assert.Len(t, half.Requests, 1000)
	assert.Equal(t, 999*time.Second/2, half.Duration())

	double, err := tr.Reshape(1, 2.5, 0, 1)
	require.NoError(t, err)
	assert.InDelta(t, 2500, len(double.Requests), 60)
	for i := 1; i < len(double.Requests); i++ {
		require.LessOrEqual(t, double.Requests[i-1].Arrival, double.Requests[i].Arrival, "sorted")
	}
	again, _ := tr.Reshape(1, 2.5, 0, 1)
	assert.Equal(t, double.Requests, again.Requests, "deterministic for a seed")

	thin, err := tr.Reshape(1, 0.3, 0, 1)
	require.NoError(t, err)
	assert.InDelta(t, 300, len(thin.Requests), 60)

	cut, err := tr.Reshape(1, 1, 100*time.Second, 1)
	require.NoError(t, err)
	assert.Len(t, cut.Requests, 101)

	_, err = tr.Reshape(0, 1, 0, 1)
	assert.ErrorContains(t, err, "time scale 0")
	_, err = tr.Reshape(1, -1, 0, 1)
	assert.ErrorContains(t, err, "rate scale -1")
}

func TestSyntheticShapes(t *testing.T) {
	for _, shape := range Shapes {
		t.Run(shape, func(t *testing.T) {
			s := Synthetic{Shape: shape, Duration: config.Duration(30 * time.Minute), BaseRate: 1, PeakRate: 4, InputTokens: 500, OutputTokens: 100}
			tr, err := s.Generate(7)
			require.NoError(t, err)
			again, _ := s.Generate(7)
			assert.Equal(t, tr.Requests, again.Requests)
			st := tr.Stats()
			assert.Greater(t, st.Requests, 1000)
			assert.InDelta(t, 500, st.MeanInputTokens, 75)
			assert.InDelta(t, 100, st.MeanOutputTokens, 15)
			assert.LessOrEqual(t, st.Duration, 30*time.Minute)
			perMinute := map[int]int{}
			for _, r := range tr.Requests {
				perMinute[int(r.Arrival/time.Minute)]++
			}
			switch shape {
			case ShapeSteady:
				assert.InDelta(t, 60, float64(perMinute[15]), 30)
			case ShapeRamp:
				assert.Greater(t, perMinute[28]+perMinute[29], 2*(perMinute[0]+perMinute[1]))
			case ShapeSpike:
				// Default spike: minutes 10 to 15.
				assert.Greater(t, perMinute[12], 2*perMinute[5])
				assert.Greater(t, perMinute[12], 2*perMinute[20])
			case ShapeDiurnal:
				assert.Greater(t, perMinute[15], 2*perMinute[0])
			}
		})
	}
	_, err := Synthetic{Shape: "square", Duration: config.Duration(time.Minute), InputTokens: 1, OutputTokens: 1}.Generate(1)
	assert.ErrorContains(t, err, `traffic.shape "square"`)
	_, err = Synthetic{Shape: ShapeRamp, Duration: config.Duration(time.Minute), BaseRate: 2, PeakRate: 1, InputTokens: 1, OutputTokens: 1}.Generate(1)
	assert.ErrorContains(t, err, "traffic.peakRate 1")
}

// TestAzureTraces parses the shared Azure traces when they are present
// (../shared/traces from the repository root); without them there is
// nothing to check here, and the test says so.
func TestAzureTraces(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "..", "shared", "traces")
	for _, name := range []string{"azure-llm-inference-2023-code.csv", "azure-llm-inference-2023-conv.csv"} {
		path := filepath.Join(dir, name)
		f, err := os.Open(path)
		if errors.Is(err, os.ErrNotExist) {
			t.Logf("%s not present: nothing to check", path)
			continue
		}
		require.NoError(t, err)
		tr, err := ParseTrace(f, name)
		f.Close()
		require.NoError(t, err, name)
		st := tr.Stats()
		assert.Greater(t, st.Requests, 5000, name)
		assert.InDelta(t, time.Hour.Minutes(), st.Duration.Minutes(), 5, name)
	}
}
