package analyzer

import "encoding/json"

// DecodeState turns the prev argument of AnalyzeState into the analyzer's
// state type T: a T or *T is returned as is (the caller must not mutate it;
// analyzers copy before changing), JSON (json.RawMessage, []byte or string)
// is unmarshaled, and a map (a snapshot's YAML) is converted through JSON.
// Anything else, including nil, another analyzer's type and invalid JSON,
// gives the zero T and false: the analyzer starts afresh.
func DecodeState[T any](prev any) (T, bool) {
	var zero T
	switch v := prev.(type) {
	case nil:
		return zero, false
	case T:
		return v, true
	case *T:
		if v == nil {
			return zero, false
		}
		return *v, true
	case json.RawMessage:
		return unmarshalState[T](v)
	case []byte:
		return unmarshalState[T](v)
	case string:
		return unmarshalState[T]([]byte(v))
	case map[string]any:
		b, err := json.Marshal(v)
		if err != nil {
			return zero, false
		}
		return unmarshalState[T](b)
	}
	return zero, false
}

func unmarshalState[T any](b []byte) (T, bool) {
	var out T
	if len(b) == 0 || string(b) == "null" {
		return out, false
	}
	if err := json.Unmarshal(b, &out); err != nil {
		var zero T
		return zero, false
	}
	return out, true
}

// Trimmer is a state that can shed its oldest history when it is too large
// to persist. TrimOldest returns a smaller copy (the receiver is not
// changed), or false when there is nothing left to shed.
type Trimmer interface {
	TrimOldest() (any, bool)
}
