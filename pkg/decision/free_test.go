package decision

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFreeSpend(t *testing.T) {
	g := Group{ModelID: "a", Namespace: "ns", Variants: []Variant{
		{Name: "a-h", Accelerator: "H100", GPUsPerReplica: 2, CurrentReplicas: 3, MinReplicas: 1, MaxReplicas: 10},
		{Name: "a-l", Accelerator: "L4", CurrentReplicas: 1, MinReplicas: 1, MaxReplicas: 10}}}
	for _, tc := range []struct {
		name    string
		free    Free
		targets []Target
		want    Free
	}{
		{name: "one more replica of 2 GPUs", free: Free{"H100": 4}, targets: []Target{{Variant: "a-h", Replicas: 4}}, want: Free{"H100": 2}},
		{name: "scale-down spends nothing", free: Free{"H100": 4}, targets: []Target{{Variant: "a-h", Replicas: 1}}, want: Free{"H100": 4}},
		{name: "unknown GPUs per replica count as 1", free: Free{"L4": 3}, targets: []Target{{Variant: "a-l", Replicas: 3}}, want: Free{"L4": 1}},
		{name: "unlimited accelerator stays absent", free: Free{"L4": 3}, targets: []Target{{Variant: "a-h", Replicas: 5}}, want: Free{"L4": 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.free.Spend(g, tc.targets)
			assert.Equal(t, tc.want, tc.free)
		})
	}
	assert.Nil(t, Free(nil).Copy())
}
