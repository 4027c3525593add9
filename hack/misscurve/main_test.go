package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const timeline = `policy,seconds,arrival_rate,replicas_l40s,ready_l40s,finished,dispatched_l40s,running_l40s,finished_l40s,missed_ttft_l40s,missed_itl_l40s
wva,0,0,2,2,0,0,0,0,0,0
wva,15,2,2,2,30,60,10,30,0,1
wva,30,2,2,2,30,60,10,30,3,2
wva,45,6,2,0,0,90,0,0,0,0
wva,60,6,3,3,90,180,30,90,0,9
static-peak,15,2,4,4,30,600,10,30,30,30
`

// Each scrape's load per replica is its requests sent over the interval
// and the ready replicas; a scrape with none ready, the first scrape and
// other policies' rows count nowhere.
func TestReadBinsByLoadPerReplica(t *testing.T) {
	cases := []struct {
		name   string
		policy string
		width  float64
		want   map[int]bin
	}{
		{"two loads", "wva", 0.5, map[int]bin{
			// 60 requests over 15 s on 2 replicas: 2 req/s each.
			4: {Samples: 2, Finished: 60, OverITL: 3, OverTTFT: 3},
			// 180 over 15 s on 3: 4 req/s each.
			8: {Samples: 1, Finished: 90, OverITL: 9},
		}},
		{"one wide bin", "wva", 10, map[int]bin{0: {Samples: 3, Finished: 150, OverITL: 12, OverTTFT: 3}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			curves, err := read(strings.NewReader(timeline), tc.policy, tc.width)
			require.NoError(t, err)
			require.Len(t, curves, 1)
			assert.Equal(t, "l40s", curves[0].Variant)
			got := map[int]bin{}
			for k, b := range curves[0].Bins {
				got[k] = *b
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestReadRejects(t *testing.T) {
	cases := []struct{ name, csv, policy, says string }{
		{"no policy rows", timeline, "kpa", `no rows of policy "kpa"`},
		{"not a timeline", "a,b\n1,2\n", "wva", `no "policy" column`},
		{"empty", "", "wva", "empty timeline"},
		{"a variant's column missing", strings.Replace(timeline, "ready_l40s", "up_l40s", 1), "wva", `no "ready_l40s" column`},
		{"a number that is not", strings.Replace(timeline, "wva,15,2,2,2,30,60", "wva,15,2,2,2,30,x", 1), "wva", "row 3, dispatched_l40s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := read(strings.NewReader(tc.csv), tc.policy, 0.5)
			assert.ErrorContains(t, err, tc.says)
		})
	}
}

func TestRenderShares(t *testing.T) {
	curves, err := read(strings.NewReader(timeline), "wva", 0.5)
	require.NoError(t, err)
	var out bytes.Buffer
	render(&out, curves, 0.5)
	assert.Contains(t, out.String(), "| 2.00-2.50 | 2 | 60 | 5.00% | 5.00% |")
	assert.Contains(t, out.String(), "| 4.00-4.50 | 1 | 90 | 10.00% | 0.00% |")
}
