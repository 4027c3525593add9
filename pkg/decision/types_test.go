package decision

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCheaper(t *testing.T) {
	tests := []struct {
		name         string
		costA, costB float64
		nameA, nameB string
		want         bool
	}{
		{"lower cost first", 5, 10, "z", "a", true},
		{"higher cost after", 10, 5, "a", "z", false},
		{"tie: alphabetical", 5, 5, "a", "b", true},
		{"tie: alphabetical, reversed", 5, 5, "b", "a", false},
		{"same variant is not cheaper than itself", 5, 5, "a", "a", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Cheaper(tt.costA, tt.nameA, tt.costB, tt.nameB))
		})
	}
}
