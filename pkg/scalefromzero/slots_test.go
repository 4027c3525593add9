package scalefromzero

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNextSlot(t *testing.T) {
	for _, tc := range []struct {
		name   string
		heads  map[string]uint64
		held   map[string]int
		want   string
		wantOK bool
	}{
		{"nobody waits", nil, map[string]int{"a": 3}, "", false},
		{"fewest held wins over the oldest waiter", map[string]uint64{"a": 1, "b": 9}, map[string]int{"a": 3, "b": 1}, "b", true},
		{"holding none counts as fewest", map[string]uint64{"a": 1, "b": 9}, map[string]int{"a": 1}, "b", true},
		{"equal holdings: oldest waiter", map[string]uint64{"a": 5, "b": 2, "c": 7}, map[string]int{"a": 1, "b": 1, "c": 1}, "b", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := nextSlot(tc.heads, tc.held)
			assert.Equal(t, tc.wantOK, ok)
			assert.Equal(t, tc.want, got)
		})
	}
}

// acquireAsync returns a channel that receives acquire's answer.
func acquireAsync(ctx context.Context, s *slots, key string) chan bool {
	ch := make(chan bool, 1)
	go func() { ch <- s.acquire(ctx, key) }()
	return ch
}

func waitQueued(t *testing.T, s *slots, key string, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.waiting[key]) == n
	}, 5*time.Second, time.Millisecond)
}

func TestSlotsFairShare(t *testing.T) {
	ctx := context.Background()
	s := newSlots(3)
	require.True(t, s.acquire(ctx, "a"))
	require.True(t, s.acquire(ctx, "a"))
	a3 := acquireAsync(ctx, s, "a")
	waitQueued(t, s, "a", 1) // a holds 2 of 3: its share
	require.True(t, s.acquire(ctx, "b"), "the slot a cannot take is free for b at once")

	c1 := acquireAsync(ctx, s, "c")
	waitQueued(t, s, "c", 1)
	cancelled, cancel := context.WithCancel(ctx)
	d1 := acquireAsync(cancelled, s, "d")
	waitQueued(t, s, "d", 1)
	cancel()
	assert.False(t, <-d1, "a waiter whose context ends gets no slot")
	waitQueued(t, s, "d", 0)

	s.release("a") // a (1 held, waited first) vs c (0 held): c
	assert.True(t, <-c1)
	select {
	case <-a3:
		t.Fatal("a got the slot over c, which held none")
	case <-time.After(20 * time.Millisecond):
	}
	s.release("b")
	assert.True(t, <-a3)
	s.mu.Lock()
	assert.Equal(t, 3, s.held)
	assert.Equal(t, map[string]int{"a": 2, "c": 1}, s.byKey)
	s.mu.Unlock()
}

func TestSlotsStaticEndpointsUseAll(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s := newSlots(3)
	for range 3 {
		require.True(t, s.acquire(ctx, ""), "static endpoints share every slot")
	}
	short, cancelShort := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancelShort()
	assert.False(t, s.acquire(short, ""), "but no more than the overall bound")
	one := newSlots(1)
	require.True(t, one.acquire(ctx, "a"), "with one slot a namespace still gets it")
}
