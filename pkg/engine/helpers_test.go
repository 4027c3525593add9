package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/decision/params"
	"github.com/wva-project/wva/pkg/enforcer"
	"github.com/wva-project/wva/pkg/pipeline"
)

func pipelineInput(m enforcer.MetricsState) pipeline.GroupInput {
	return pipeline.GroupInput{Metrics: m, Group: decision.Group{ModelID: "m", Namespace: "prod"}}
}

func resultWith(replicas int32, reason string) pipeline.GroupResult {
	return pipeline.GroupResult{Analyzer: "saturation-percentage", Targets: []decision.Target{{Variant: "a", Replicas: replicas, Reason: reason, Action: decision.ActionNone, Rule: decision.RuleSteady}}}
}

// percentageStore selects the percentage analyzer in the saturation
// ConfigMap's default entry (plus extra lines): the replica counts these
// engine tests expect are its decisions, not the built-in slo-planner's.
func percentageStore(t *testing.T, extra string) *config.Store {
	t.Helper()
	store := config.NewStore()
	require.NoError(t, store.Apply(config.SaturationConfigMapName,
		map[string]string{config.DefaultKey: "analyzerName: " + params.AnalyzerSaturationPercentage + "\n" + extra}))
	return store
}
