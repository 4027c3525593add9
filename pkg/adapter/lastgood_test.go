package adapter

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/config"
)

// gaugeSeries reads wva_config_entry_invalid from the registry, as
// "configmap|key" -> value.
func gaugeSeries(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "wva_config_entry_invalid" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			out[labels["configmap"]+"|"+labels["key"]] = m.GetGauge().GetValue()
		}
	}
	return out
}

// Any namespace may create local ConfigMaps with keys of its choosing, so
// a gauge keeping every (ConfigMap, key) ever seen would grow without
// bound. Series go when their entry or ConfigMap goes; local ones are
// bounded.
func TestInvalidGaugeSeriesFollowEntries(t *testing.T) {
	const bad = "queueLengthThreshold: -1"
	sat := config.SaturationConfigMapName
	store := config.NewStore()
	reg := prometheus.NewRegistry()
	g := newInvalidGauge(reg)
	sync := func() map[string]float64 {
		g.sync(store.Entries(), store.Invalid())
		return gaugeSeries(t, reg)
	}

	steps := []struct {
		name  string
		apply func()
		want  map[string]float64
	}{
		{"global: a broken and a valid entry", func() {
			_ = store.Apply(sat, map[string]string{config.DefaultKey: bad, "llama": "model_id: meta/llama\nqueueLengthThreshold: 8"})
		}, map[string]float64{sat + "|default": 1, sat + "|llama": 0}},
		{"default fixed, llama removed", func() {
			_ = store.Apply(sat, map[string]string{config.DefaultKey: "queueLengthThreshold: 5"})
		}, map[string]float64{sat + "|default": 0}},
		{"local ConfigMap with keys of its choosing", func() {
			_ = store.ApplyNamespace("team-a", sat, map[string]string{config.DefaultKey: bad,
				"x1": "model_id: a\n" + bad, "x2": "model_id: b\n" + bad, "x3": "model_id: c\nqueueLengthThreshold: 8"})
		}, map[string]float64{sat + "|default": 0, "team-a/" + sat + "|default": 1, "team-a/" + sat + "|(other)": 1}},
		{"local ConfigMap fixed", func() {
			_ = store.ApplyNamespace("team-a", sat, map[string]string{"x3": "model_id: c\nqueueLengthThreshold: 8"})
		}, map[string]float64{sat + "|default": 0, "team-a/" + sat + "|(other)": 0}},
		{"local ConfigMap deleted", func() { store.RemoveNamespace("team-a", sat) },
			map[string]float64{sat + "|default": 0}},
		{"global ConfigMap deleted", func() { store.Remove(sat) }, map[string]float64{}},
	}
	for _, s := range steps {
		s.apply()
		assert.Equal(t, s.want, sync(), s.name)
	}

	// Many namespaces: at most maxLocalConfigMapSeries have their own
	// series; the rest share one, 1 since they hold rejected entries.
	n := maxLocalConfigMapSeries + 50
	for i := range n {
		_ = store.ApplyNamespace(fmt.Sprintf("ns-%03d", i), sat, map[string]string{config.DefaultKey: bad})
	}
	got := sync()
	assert.Len(t, got, maxLocalConfigMapSeries+1)
	assert.Equal(t, 1.0, got["(other)|default"])
	for i := range n {
		store.RemoveNamespace(fmt.Sprintf("ns-%03d", i), sat)
	}
	assert.Empty(t, sync(), "every series goes with its ConfigMap")
}
