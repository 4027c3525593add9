package engine

import (
	"encoding/json"

	"github.com/wva-project/wva/pkg/analyzer"
	"github.com/wva-project/wva/pkg/decide"
	"github.com/wva-project/wva/pkg/decision"
)

const (
	// MaxGroupStateBytes bounds one group's persisted analyzer state; a
	// larger one sheds its oldest history (analyzer.Trimmer) or is left out.
	// The planner's 1,024 plans are about 115 KiB, its hold needs far
	// fewer; the 256 it keeps before its profile's days (about 29 KiB)
	// and two weeks of profile (about 11 KiB) fit.
	MaxGroupStateBytes = 48 << 10
	// MaxStateBytes bounds all groups' persisted state together, well under
	// the 1 MiB a ConfigMap may hold; groups beyond it are left out (they
	// start afresh on a new leader).
	MaxStateBytes = 768 << 10
)

// persistedState is one group's data value: the key is only an index, the
// group is named here in full.
type persistedState struct {
	Namespace string          `json:"namespace"`
	ModelID   string          `json:"modelID"`
	State     json.RawMessage `json:"state"`
}

// EncodeState turns analyzer state into ConfigMap data, one JSON value per
// group within MaxGroupStateBytes and MaxStateBytes in all. It also returns
// how many groups were left out for size.
func EncodeState(state map[decide.GroupKey]any) (map[string]string, int) {
	keys := make([]decide.GroupKey, 0, len(state))
	for k := range state {
		keys = append(keys, k)
	}
	decide.SortGroupKeys(keys)
	data := map[string]string{}
	total, dropped := 0, 0
	for _, k := range keys {
		v, ok := encodeGroup(k, state[k])
		if !ok || total+len(v) > MaxStateBytes {
			dropped++
			continue
		}
		data[StateDataKey(k)] = v
		total += len(v)
	}
	return data, dropped
}

func encodeGroup(k decide.GroupKey, st any) (string, bool) {
	for {
		raw, err := json.Marshal(st)
		if err != nil {
			return "", false
		}
		b, err := json.Marshal(persistedState{Namespace: k.Namespace, ModelID: k.ModelID, State: raw})
		if err != nil {
			return "", false
		}
		if len(b) <= MaxGroupStateBytes {
			return string(b), true
		}
		t, ok := st.(analyzer.Trimmer)
		if !ok {
			return "", false
		}
		if st, ok = t.TrimOldest(); !ok {
			return "", false
		}
	}
}

// DecodeState reads EncodeState's data back; values that do not parse are
// skipped (their groups start afresh). States stay JSON for the analyzers'
// analyzer.DecodeState.
func DecodeState(data map[string]string) map[decide.GroupKey]any {
	out := make(map[decide.GroupKey]any, len(data))
	for _, v := range data {
		var p persistedState
		if err := json.Unmarshal([]byte(v), &p); err != nil || len(p.State) == 0 {
			continue
		}
		out[decide.GroupKey{Namespace: p.Namespace, ModelID: p.ModelID}] = p.State
	}
	return out
}

// StateDataKey is the group's ConfigMap data key (decision.DataKey).
func StateDataKey(k decide.GroupKey) string { return decision.DataKey(k.Namespace, k.ModelID) }
