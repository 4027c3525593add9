package engine

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/wva-project/wva/pkg/analyzer"
	"github.com/wva-project/wva/pkg/analyzer/planner"
	"github.com/wva-project/wva/pkg/decide"
)

func fullPlanner() planner.State {
	st := planner.State{Analyzer: planner.Name, HoldFactor: 12}
	for i := range 1024 {
		st.Plans = append(st.Plans, planner.PlanPoint{At: t0.Add(time.Duration(i) * 30 * time.Second), Rate: 1234.5678901 + float64(i)})
	}
	return st
}

func TestEncodeStateBounds(t *testing.T) {
	full := fullPlanner()
	raw, err := json.Marshal(full)
	require.NoError(t, err)
	require.Greater(t, len(raw), MaxGroupStateBytes, "the test needs a planner state over the bound")

	big := strings.Repeat("x", MaxGroupStateBytes-200) // fits one group, not trimmable
	many := map[decide.GroupKey]any{}
	for i := range 40 {
		many[decide.GroupKey{Namespace: "prod", ModelID: fmt.Sprintf("m%02d", i)}] = big
	}
	cases := map[string]struct {
		state       map[decide.GroupKey]any
		wantGroups  int
		wantDropped int
	}{
		"small states round-trip":          {map[decide.GroupKey]any{{Namespace: "prod", ModelID: "meta/llama-3.1-8b"}: map[string]int{"n": 1}, {Namespace: "dev", ModelID: "m"}: []int{1, 2}}, 2, 0},
		"planner history trimmed to fit":   {map[decide.GroupKey]any{{Namespace: "prod", ModelID: "m"}: full}, 1, 0},
		"untrimmable over the group bound": {map[decide.GroupKey]any{{Namespace: "prod", ModelID: "m"}: strings.Repeat("x", MaxGroupStateBytes)}, 0, 1},
		"groups beyond the total bound":    {many, MaxStateBytes / (MaxGroupStateBytes - 200 + 60), 40 - MaxStateBytes/(MaxGroupStateBytes-200+60)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			data, dropped := EncodeState(tc.state)
			assert.Len(t, data, tc.wantGroups)
			assert.Equal(t, tc.wantDropped, dropped)
			total := 0
			for k, v := range data {
				assert.Empty(t, validation.IsConfigMapKey(k), k)
				assert.LessOrEqual(t, len(v), MaxGroupStateBytes)
				total += len(v)
			}
			assert.LessOrEqual(t, total, MaxStateBytes)
			for k, v := range DecodeState(data) {
				want, err := json.Marshal(tc.state[k])
				require.NoError(t, err)
				if name == "planner history trimmed to fit" {
					st, ok := analyzer.DecodeState[planner.State](v)
					require.True(t, ok)
					require.NotEmpty(t, st.Plans)
					assert.Less(t, len(st.Plans), len(full.Plans))
					// The newest plans are the ones kept.
					assert.Equal(t, full.Plans[len(full.Plans)-len(st.Plans):], st.Plans)
					continue
				}
				assert.JSONEq(t, string(want), string(v.(json.RawMessage)))
			}
		})
	}
}

// TestEncodeStateKeepsTwoWeeksOfProfile: a planner holding as many plans
// as it keeps before shedding its profile (each with a rate, arrivals and
// a level at full precision) persists every day of a two-week profile, so
// a new leader orders the rises of the same weekday.
func TestEncodeStateKeepsTwoWeeksOfProfile(t *testing.T) {
	st := planner.State{Analyzer: planner.Name, HoldFactor: 12}
	for i := range 256 {
		x := float64(i)
		st.Plans = append(st.Plans, planner.PlanPoint{At: t0.Add(time.Duration(i) * 30 * time.Second),
			Rate: 12.3 + math.Sin(x)/7, Arrivals: 9.1 + math.Cos(x)/3, Level: 1 + math.Sin(x/5)/11})
	}
	day := t0.Unix() / 86400
	peaks := func(d int64) []float64 {
		out := make([]float64, 144)
		for i := range out {
			out[i] = math.Round((2.05+math.Sin(float64(i)/7)+float64(d%3))*100) / 100
		}
		return out
	}
	st.Profile = planner.Profile{Day: day, Today: peaks(day)}
	for d := day - 14; d < day; d++ {
		st.Profile.Past = append(st.Profile.Past, planner.ProfileDay{Day: d, Peaks: peaks(d)})
	}
	key := decide.GroupKey{Namespace: "prod", ModelID: "m"}
	data, dropped := EncodeState(map[decide.GroupKey]any{key: st})
	require.Zero(t, dropped)
	got, ok := analyzer.DecodeState[planner.State](DecodeState(data)[key])
	require.True(t, ok)
	assert.Equal(t, st.Profile, got.Profile)
	assert.Len(t, got.Plans, len(st.Plans))
}

func TestStateDataKeyDistinct(t *testing.T) {
	a := StateDataKey(decide.GroupKey{Namespace: "prod", ModelID: "meta/llama"})
	b := StateDataKey(decide.GroupKey{Namespace: "prod", ModelID: "meta-llama"})
	assert.NotEqual(t, a, b)
	assert.Empty(t, validation.IsConfigMapKey(StateDataKey(decide.GroupKey{Namespace: "prod", ModelID: strings.Repeat("é/", 300)})))
}
