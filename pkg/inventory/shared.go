package inventory

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/decision"
)

// MaxDecisionsBytes bounds the persisted decisions (about 250 bytes each,
// so some 2,000 variants), well under the 1 MiB a ConfigMap may hold;
// variants beyond it are left out (followers answer NotFound for them until
// they get a leader of their own).
const MaxDecisionsBytes = 512 << 10

// persistedDecision is one opted-in variant's decision of record as the leader
// persists it: what the metrics API and the KEDA scaler serve, and the UID
// a new leader matches its variants by.
type persistedDecision struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Kind      string    `json:"kind"`
	UID       types.UID `json:"uid"`
	Desired   int32     `json:"desiredReplicas"`
	Reason    string    `json:"reason,omitempty"`
	// DecidedAt is status.desiredOptimizedAlloc.lastRunTime: a follower
	// serves an old one as stale, as it does a VA's.
	DecidedAt  metav1.Time `json:"decidedAt"`
	LastUpdate metav1.Time `json:"lastUpdate,omitempty"`
}

// Persisted is the decided variants as ConfigMap data, one key per
// variant (decision.DataKey) within MaxDecisionsBytes; it also returns how
// many were left out for size.
func (m *Memory) Persisted() (map[string]string, int) {
	vas := m.list("")
	data := map[string]string{}
	total, dropped := 0, 0
	for _, va := range vas {
		src, ok := SourceOf(va)
		alloc := va.Status.DesiredOptimizedAlloc
		if !ok || alloc.LastRunTime.IsZero() {
			continue // no decision yet: followers answer "no decision" as NotFound
		}
		b, err := json.Marshal(persistedDecision{Namespace: va.Namespace, Name: va.Name, Kind: src.Kind, UID: va.UID,
			Desired: alloc.NumReplicas, Reason: alloc.Reason, DecidedAt: alloc.LastRunTime, LastUpdate: alloc.LastUpdate})
		if err != nil || total+len(b) > MaxDecisionsBytes {
			dropped++
			continue
		}
		data[decision.DataKey(va.Namespace, va.Name)] = string(b)
		total += len(b)
	}
	return data, dropped
}

// Restore makes Persisted's data the variants served: a follower's view
// of the leader's decisions. A new leader's first Sync keeps their status
// (same UID) until its engine decides. Values that do not parse are skipped.
func (m *Memory) Restore(data map[string]string) {
	next := make(map[string]*llmdv1alpha1.VariantAutoscaling, len(data))
	for _, v := range data {
		var d persistedDecision
		if err := json.Unmarshal([]byte(v), &d); err != nil || d.Name == "" {
			continue
		}
		k, ok := kinds[d.Kind]
		if !ok {
			continue
		}
		next[key(d.Namespace, d.Name)] = &llmdv1alpha1.VariantAutoscaling{
			TypeMeta: metav1.TypeMeta{APIVersion: llmdv1alpha1.SchemeGroupVersion.String(), Kind: "VariantAutoscaling"},
			ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: d.Name, UID: d.UID,
				Annotations: map[string]string{k.annotation: d.Name}},
			Status: llmdv1alpha1.VariantAutoscalingStatus{DesiredOptimizedAlloc: llmdv1alpha1.OptimizedAlloc{
				NumReplicas: d.Desired, Reason: d.Reason, LastRunTime: d.DecidedAt, LastUpdate: d.LastUpdate}},
		}
	}
	m.mu.Lock()
	changed := !sameDecisions(m.vas, next)
	m.vas = next
	m.mu.Unlock()
	if changed {
		m.changed()
	}
}

// sameDecisions: the same variants with the same served decision (what
// Changed's listeners act on).
func sameDecisions(a, b map[string]*llmdv1alpha1.VariantAutoscaling) bool {
	if len(a) != len(b) {
		return false
	}
	for k, va := range a {
		o, ok := b[k]
		if !ok {
			return false
		}
		ad, bd := va.Status.DesiredOptimizedAlloc, o.Status.DesiredOptimizedAlloc
		if ad.NumReplicas != bd.NumReplicas || ad.LastRunTime.IsZero() != bd.LastRunTime.IsZero() {
			return false
		}
	}
	return true
}
