package planner

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// midnight is a day's start, UTC (a Monday).
var midnight = time.Date(2026, time.March, 2, 0, 0, 0, 0, time.UTC)

// workdayRate is 1 req/s at night and 5 from 09:00 to 17:00, with a
// burst to 9 at 14:00-14:10 when burst is set.
func workdayRate(t time.Time, burst bool) float64 {
	h := t.Sub(t.Truncate(24 * time.Hour)).Hours()
	switch {
	case burst && h >= 14 && h < 14+1.0/6:
		return 9
	case h >= 9 && h < 17:
		return 5
	}
	return 1
}

// learnDays records days of workdayRate, a cycle a minute, from midnight,
// and the next day's first minute: the days are past.
func learnDays(days int, burst bool) Profile {
	return learnProfile(days, func(t time.Time) float64 { return workdayRate(t, burst) })
}

// weekRate is workdayRate from Monday to Friday and the night's rate all
// weekend.
func weekRate(t time.Time) float64 {
	if d := t.Weekday(); d == time.Saturday || d == time.Sunday {
		return 1
	}
	return workdayRate(t, false)
}

// learnProfile records days of rate, a cycle a minute, from midnight, and the
// next day's first minute.
func learnProfile(days int, rate func(time.Time) float64) Profile {
	var p Profile
	for t := midnight; !t.After(midnight.Add(time.Duration(days) * 24 * time.Hour)); t = t.Add(time.Minute) {
		p = p.record(t, rate(t))
	}
	return p
}

func TestProfileRecord(t *testing.T) {
	p := learnDays(20, false)
	require.Len(t, p.Past, profileHistory, "at most profileHistory past days")
	assert.Equal(t, midnight.Add(20*24*time.Hour).Unix()/86400, p.Day)
	assert.Equal(t, p.Day-profileHistory, p.Past[0].Day, "the oldest is the same weekday two weeks ago")
	assert.Equal(t, p.Day-1, p.Past[len(p.Past)-1].Day, "yesterday is the newest past day")
	at := func(h float64) int { return int(h * 6) }
	assert.Equal(t, 1.0, p.Past[0].Peaks[at(3)])
	assert.Equal(t, 5.0, p.Past[0].Peaks[at(10)])

	// A new day starts unseen but for the slot of its first cycle.
	next := p.record(midnight.Add(21*24*time.Hour+30*time.Minute), 2)
	assert.Equal(t, float64(unseen), next.Today[0])
	assert.Equal(t, 2.0, next.Today[3])
	assert.Equal(t, 1.0, next.Past[len(next.Past)-1].Peaks[0], "the day before, as far as it was seen")
	assert.Equal(t, float64(unseen), next.Past[len(next.Past)-1].Peaks[3])
	// The previous state is not changed.
	assert.Equal(t, float64(unseen), p.Today[3])

	// A later cycle in the slot keeps the higher rate, rounded to three
	// significant digits.
	assert.Equal(t, 2.35, next.record(midnight.Add(21*24*time.Hour+31*time.Minute), 2.3456).Today[3])
	assert.Equal(t, 2.0, next.record(midnight.Add(21*24*time.Hour+32*time.Minute), 1.5).Today[3])

	// After more than profileHistory away, no past day is kept.
	gone := p.record(midnight.Add(40*24*time.Hour), 1)
	assert.Empty(t, gone.Past)
}

func TestProfileRise(t *testing.T) {
	horizon := 7 * time.Minute
	day := 24 * time.Hour
	tests := map[string]struct {
		days  int
		burst bool
		at    time.Duration // into the day after the profile's days
		// today is today's rate as a share of the past days'.
		today float64
		// late delays today's day against the past days'.
		late     time.Duration
		wantRise float64
	}{
		"no history":                       {0, false, 8*time.Hour + 55*time.Minute, 1, 0, 0},
		"a workday's 09:00 rise ahead":     {2, false, 8*time.Hour + 55*time.Minute, 1, 0, 4},
		"until it comes":                   {2, false, 9*time.Hour + 5*time.Minute, 1, 10 * time.Minute, 4},
		"too far ahead to order yet":       {2, false, 8*time.Hour + 30*time.Minute, 1, 0, 0},
		"a quieter day rises as much less": {2, false, 8*time.Hour + 55*time.Minute, 0.5, 0, 2},
		"a busier day rises as much more":  {2, false, 8*time.Hour + 55*time.Minute, 2, 0, 8},
		"already risen":                    {2, false, 10 * time.Hour, 1, 0, 0},
		"a burst is not a level":           {2, true, 13*time.Hour + 55*time.Minute, 1, 0, 0},
		"the evening falls":                {2, false, 16*time.Hour + 55*time.Minute, 1, 0, 0},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			p := learnDays(tt.days, tt.burst)
			if tt.days == 0 {
				p = Profile{}
			}
			today := midnight.Add(time.Duration(tt.days) * day)
			now := today.Add(tt.at)
			for at := today.Add(time.Minute); at.Before(now); at = at.Add(time.Minute) {
				p = p.record(at, tt.today*workdayRate(at.Add(-tt.late), false))
			}
			assert.InDelta(t, tt.wantRise, p.rise(now, horizon), 1e-9)
		})
	}
}

// TestProfileRiseByWeekday: with a week of history the same weekday tells
// today's rises. The Monday after a weekend orders its 09:00 rise, which
// the weekend before it does not have; a Saturday after five workdays does
// not, once a Saturday is known.
func TestProfileRiseByWeekday(t *testing.T) {
	horizon := 7 * time.Minute
	tests := map[string]struct {
		days     int // learned before today (today is midnight + days)
		wantRise float64
	}{
		"Tuesday after the first weekend, a week known": {8, 4},
		"Monday after the first weekend, a week known":  {7, 4},
		"Monday after two weeks":                        {14, 4},
		"Saturday before a week is known: Thu and Fri":  {5, 4},
		"Saturday, a Saturday known":                    {12, 0},
		"Sunday before a week is known: Fri and Sat":    {6, 0},
		"Wednesday in the second week: last Wednesday":  {9, 4},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			p := learnProfile(tt.days, weekRate)
			today := midnight.Add(time.Duration(tt.days) * 24 * time.Hour)
			now := today.Add(8*time.Hour + 55*time.Minute)
			for at := today.Add(time.Minute); at.Before(now); at = at.Add(time.Minute) {
				p = p.record(at, weekRate(at))
			}
			assert.InDelta(t, tt.wantRise, p.rise(now, horizon), 1e-9)
		})
	}

	// A Monday whose week-old Monday is gone (trimmed to persist) plans
	// from the days before it: the weekend, no rise.
	p := learnProfile(7, weekRate)
	p, ok := p.trimOldestDay()
	require.True(t, ok)
	now := midnight.Add(7*24*time.Hour + 8*time.Hour + 55*time.Minute)
	for at := midnight.Add(7*24*time.Hour + time.Minute); at.Before(now); at = at.Add(time.Minute) {
		p = p.record(at, weekRate(at))
	}
	assert.Zero(t, p.rise(now, horizon))
}

// TestProfileRiseOfNoise: a flat day's 1m rates scatter about its mean;
// a slot's highest of them is no rise over the next lower one.
func TestProfileRiseOfNoise(t *testing.T) {
	var p Profile
	noisy := func(at time.Time) float64 { return 1 + 0.2*float64(at.Minute()%2*2-1) }
	for at := midnight; at.Before(midnight.Add(50 * time.Hour)); at = at.Add(time.Minute) {
		p = p.record(at, noisy(at))
	}
	assert.Zero(t, p.rise(midnight.Add(50*time.Hour), 7*time.Minute))

	// From an idle night, a rise is its whole height.
	var idle Profile
	for at := midnight; at.Before(midnight.Add(32*time.Hour + 55*time.Minute)); at = at.Add(time.Minute) {
		idle = idle.record(at, workdayRate(at, false)-1)
	}
	assert.InDelta(t, 4.0, idle.rise(midnight.Add(32*time.Hour+55*time.Minute), 7*time.Minute), 1e-9)
}

func TestSlotsAhead(t *testing.T) {
	at := midnight.Add(23*time.Hour + 55*time.Minute)
	assert.Equal(t, []int{143, 0}, slotsAhead(at, 7*time.Minute), "across midnight")
	assert.Equal(t, []int{0}, slotsAhead(midnight, 9*time.Minute))
	assert.Equal(t, []int{0, 1}, slotsAhead(midnight, 10*time.Minute))
	assert.Len(t, slotsAhead(midnight, 48*time.Hour), profileSlots)
}

// TestTrimOldestShedsProfileDays: past the plans the hold needs, the
// profile's oldest day goes first.
func TestTrimOldestShedsProfileDays(t *testing.T) {
	s := State{Profile: learnDays(2, false), Plans: make([]PlanPoint, minPersistedPlans)}
	trimmed, ok := s.TrimOldest()
	require.True(t, ok)
	ts := trimmed.(State)
	assert.Len(t, ts.Plans, minPersistedPlans)
	assert.Len(t, ts.Profile.Past, 1)
	assert.Len(t, s.Profile.Past, 2, "the receiver is not changed")

	s.Plans = make([]PlanPoint, 2*minPersistedPlans)
	trimmed, ok = s.TrimOldest()
	require.True(t, ok)
	assert.Len(t, trimmed.(State).Plans, minPersistedPlans)
	assert.Len(t, trimmed.(State).Profile.Past, 2)
}
