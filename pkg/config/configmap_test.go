package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
)

func configMap(namespace, name string, labeled bool, data map[string]string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: data}
	if labeled {
		cm.Labels = map[string]string{llmdv1alpha1.LabelConfigMapName: llmdv1alpha1.ConfigMapLabelValue}
	}
	return cm
}

// TestNamespaceLocalLayering: global ConfigMaps in wva-system, local ones
// in a VA's namespace layered field by field over them (built-ins, global
// default, local default, global override, local override), unlabeled
// ones not read.
func TestNamespaceLocalLayering(t *testing.T) {
	const sat, stz = SaturationConfigMapName, ScaleToZeroConfigMapName
	global := map[string]string{
		"default": "kvCacheThreshold: 0.85\nkvSpareTrigger: 0.12",
		"llama":   "model_id: llama\nqueueLengthThreshold: 8",
	}
	type want struct {
		model, ns string
		kv, queue float64
		trigger   float64
		source    string
		zero      bool
	}
	cases := []struct {
		name       string
		cms        []*corev1.ConfigMap
		unlabeled  int
		want       []want
		invalidFor int
	}{{
		name: "global only",
		cms:  []*corev1.ConfigMap{configMap("wva-system", sat, true, global)},
		want: []want{
			{"llama", "prod", 0.85, 8, 0.12, "llama", false},
			{"other", "dev", 0.85, 5, 0.12, "default", false},
		},
	}, {
		name: "namespace default overrides one key",
		cms: []*corev1.ConfigMap{configMap("wva-system", sat, true, global),
			configMap("prod", sat, true, map[string]string{"default": "kvCacheThreshold: 0.60"})},
		want: []want{
			// kvCacheThreshold from prod's default; the rest from the global
			// default and the global llama override.
			{"llama", "prod", 0.60, 8, 0.12, "llama", false},
			{"other", "prod", 0.60, 5, 0.12, "prod/wva-saturation-scaling-config: default", false},
			{"other", "dev", 0.85, 5, 0.12, "default", false},
		},
	}, {
		name: "namespace override of one model",
		cms: []*corev1.ConfigMap{configMap("wva-system", sat, true, global),
			configMap("prod", sat, true, map[string]string{"llama-prod": "model_id: llama\nqueueLengthThreshold: 4\nqueueSpareTrigger: 2"})},
		want: []want{
			{"llama", "prod", 0.85, 4, 0.12, "prod/wva-saturation-scaling-config: llama-prod", false},
			{"other", "prod", 0.85, 5, 0.12, "default", false},
			{"llama", "dev", 0.85, 8, 0.12, "llama", false},
		},
	}, {
		name: "namespace-local ConfigMap without global",
		cms: []*corev1.ConfigMap{configMap("prod", sat, true, map[string]string{"default": "kvCacheThreshold: 0.60"}),
			configMap("prod", stz, true, map[string]string{"default": "enable_scale_to_zero: true"})},
		want: []want{
			{"llama", "prod", 0.60, 5, 0.10, "prod/wva-saturation-scaling-config: default", true},
			{"llama", "dev", 0.80, 5, 0.10, "built-in defaults", false},
		},
	}, {
		name: "unlabeled ignored",
		cms: []*corev1.ConfigMap{configMap("wva-system", sat, true, global),
			configMap("prod", sat, false, map[string]string{"default": "kvCacheThreshold: 0.60"}),
			configMap("wva-system", stz, false, map[string]string{"default": "enable_scale_to_zero: true"})},
		unlabeled: 2,
		want: []want{
			{"llama", "prod", 0.85, 8, 0.12, "llama", false},
			{"other", "dev", 0.85, 5, 0.12, "default", false},
		},
	}, {
		name: "invalid local entry: global in force, error listed for the namespace",
		cms: []*corev1.ConfigMap{configMap("wva-system", sat, true, global),
			configMap("prod", sat, true, map[string]string{"default": "kvCacheThreshold: 7"})},
		want: []want{
			{"other", "prod", 0.85, 5, 0.12, "default", false},
		},
		invalidFor: 1,
	}, {
		name: "local entry inconsistent with the global default is skipped",
		cms: []*corev1.ConfigMap{configMap("wva-system", sat, true, global),
			// Valid on built-ins (trigger 0.10 < 0.15) but not under the
			// global kvSpareTrigger 0.12 once kvCacheThreshold is 0.11.
			configMap("prod", sat, true, map[string]string{"default": "kvCacheThreshold: 0.11"})},
		want: []want{
			{"other", "prod", 0.85, 5, 0.12, `default ("prod/wva-saturation-scaling-config: default" inconsistent with the layers below, ignored)`, false},
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStore()
			unlabeled, globalEntries := 0, 0
			for _, cm := range tc.cms {
				if cm.Namespace == "wva-system" && Labeled(cm.Labels) {
					globalEntries += len(cm.Data)
				}
				err := s.ApplyConfigMap("wva-system", cm)
				if err == ErrUnlabeled {
					unlabeled++
				} else if tc.invalidFor == 0 {
					require.NoError(t, err)
				}
			}
			assert.Equal(t, tc.unlabeled, unlabeled)
			for _, w := range tc.want {
				r := s.Resolve(w.model, w.ns)
				assert.Equal(t, w.kv, r.Scaling.KvCacheThreshold, "%s/%s kvCacheThreshold", w.ns, w.model)
				assert.Equal(t, w.queue, r.Scaling.QueueLengthThreshold, "%s/%s queueLengthThreshold", w.ns, w.model)
				assert.Equal(t, w.trigger, r.Scaling.KvSpareTrigger, "%s/%s kvSpareTrigger", w.ns, w.model)
				assert.Equal(t, w.source, r.SaturationSource, "%s/%s source", w.ns, w.model)
				assert.Equal(t, w.zero, r.ScaleToZero.Enabled, "%s/%s enableScaleToZero", w.ns, w.model)
			}
			assert.Len(t, s.InvalidFor("other", "prod"), tc.invalidFor)
			assert.Empty(t, s.InvalidFor("other", "dev"), "a namespace's invalid entries concern only it")
			assert.Len(t, s.LastGood(), globalEntries, "only global entries are persisted")
		})
	}
}

// TestConfigMapLosesLabelOrGoes: a namespace-local ConfigMap stops
// applying when its label is removed or it is deleted.
func TestConfigMapLosesLabelOrGoes(t *testing.T) {
	for _, tc := range []struct {
		name string
		drop func(*Store, *corev1.ConfigMap) error
	}{
		{"label removed", func(s *Store, cm *corev1.ConfigMap) error {
			cm.Labels = nil
			return s.ApplyConfigMap("wva-system", cm)
		}},
		{"deleted", func(s *Store, cm *corev1.ConfigMap) error { s.RemoveConfigMap("wva-system", cm); return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStore()
			cm := configMap("prod", SaturationConfigMapName, true, map[string]string{"default": "kvCacheThreshold: 0.60"})
			require.NoError(t, s.ApplyConfigMap("wva-system", cm))
			require.Equal(t, 0.60, s.Resolve("m", "prod").Scaling.KvCacheThreshold)
			_ = tc.drop(s, cm)
			r := s.Resolve("m", "prod")
			assert.Equal(t, 0.80, r.Scaling.KvCacheThreshold)
			assert.Equal(t, "built-in defaults", r.SaturationSource)
			assert.Empty(t, s.local, "nothing kept for the namespace")
		})
	}
}
