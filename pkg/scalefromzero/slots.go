package scalefromzero

import (
	"context"
	"sync"
)

// slots bounds the scrapes in flight, overall (max) and per namespace
// (perNamespace), and hands a freed slot to the waiting namespace that
// holds the fewest, oldest waiter first among equals. So a slow EPP holds
// only its own slot, a namespace of slow EPPs cannot hold every slot, and
// a namespace that needs one waits at most until one frees, however many
// EPPs the others have. The key "" (static --epp-url endpoints, which
// serve every namespace and are the only key in that mode) may use all.
type slots struct {
	mu           sync.Mutex
	max          int
	perNamespace int
	held         int
	byKey        map[string]int
	waiting      map[string][]*slotWaiter
	seq          uint64
}

type slotWaiter struct {
	seq     uint64
	ready   chan struct{}
	granted bool
}

// newSlots: max overall; a namespace gets max-1 so one stays for the
// others (with max 1 there is nothing to keep).
func newSlots(maxInFlight int) *slots {
	maxInFlight = max(1, maxInFlight)
	return &slots{max: maxInFlight, perNamespace: max(1, maxInFlight-1),
		byKey: map[string]int{}, waiting: map[string][]*slotWaiter{}}
}

func (s *slots) limit(key string) int {
	if key == "" {
		return s.max
	}
	return s.perNamespace
}

// acquire takes a slot for key, waiting for one; false if ctx ends first.
func (s *slots) acquire(ctx context.Context, key string) bool {
	s.mu.Lock()
	if s.held < s.max && s.byKey[key] < s.limit(key) && len(s.waiting[key]) == 0 {
		s.takeLocked(key)
		s.mu.Unlock()
		return true
	}
	w := &slotWaiter{seq: s.seq, ready: make(chan struct{})}
	s.seq++
	s.waiting[key] = append(s.waiting[key], w)
	s.mu.Unlock()
	select {
	case <-w.ready:
		return true
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.granted { // granted as ctx ended: hand it on
		s.releaseLocked(key)
		return false
	}
	q := s.waiting[key]
	for i := range q {
		if q[i] == w {
			q = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	if len(q) == 0 {
		delete(s.waiting, key)
	} else {
		s.waiting[key] = q
	}
	return false
}

// release gives back a slot of key.
func (s *slots) release(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseLocked(key)
}

func (s *slots) takeLocked(key string) {
	s.held++
	s.byKey[key]++
}

func (s *slots) releaseLocked(key string) {
	s.held--
	if s.byKey[key]--; s.byKey[key] <= 0 {
		delete(s.byKey, key)
	}
	for s.held < s.max {
		heads := make(map[string]uint64, len(s.waiting))
		for k, q := range s.waiting {
			if s.byKey[k] < s.limit(k) {
				heads[k] = q[0].seq
			}
		}
		k, ok := nextSlot(heads, s.byKey)
		if !ok {
			return
		}
		w := s.waiting[k][0]
		if s.waiting[k] = s.waiting[k][1:]; len(s.waiting[k]) == 0 {
			delete(s.waiting, k)
		}
		s.takeLocked(k)
		w.granted = true
		close(w.ready)
	}
}

// nextSlot picks who gets a freed slot among the keys that may take one
// (heads: each key's oldest waiter): the key holding the fewest slots, the
// oldest waiter among equals.
func nextSlot(heads map[string]uint64, held map[string]int) (string, bool) {
	best, found := "", false
	for k, seq := range heads {
		if !found || held[k] < held[best] || (held[k] == held[best] && seq < heads[best]) {
			best, found = k, true
		}
	}
	return best, found
}
