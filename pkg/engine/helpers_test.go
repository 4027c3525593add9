package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/decision/params"
)

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
