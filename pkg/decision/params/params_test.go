package params

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAnalyzer(t *testing.T) {
	r := Defaults()
	assert.Equal(t, AnalyzerSLOPlanner, r.Analyzer())
	r.Scaling.AnalyzerName = AnalyzerSaturationToken
	assert.Equal(t, AnalyzerSaturationToken, r.Analyzer())
	r.QueueingModel = &QueueingModel{}
	assert.Equal(t, AnalyzerQueueingModel, r.Analyzer(), "a queueing-model entry selects the SLO analyzer")
}

func TestDurationJSON(t *testing.T) {
	b, err := json.Marshal(Duration(90 * time.Second))
	require.NoError(t, err)
	assert.Equal(t, `"1m30s"`, string(b))
	var d Duration
	require.NoError(t, json.Unmarshal([]byte(`"10m"`), &d))
	assert.Equal(t, 10*time.Minute, d.D())
	assert.ErrorContains(t, json.Unmarshal([]byte(`600`), &d), `want a duration string such as "10m", got 600`)
	assert.ErrorContains(t, json.Unmarshal([]byte(`"soon"`), &d), `got "soon"`)
}
