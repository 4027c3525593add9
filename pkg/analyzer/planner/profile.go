package planner

import (
	"math"
	"time"
)

// Users run for weeks, and most of their traffic keeps the hours of the
// people behind it. The profile is the group's arrivals by time of day
// (UTC), learned from its own history and persisted with the planner's
// state: for each profileSlot of each of the last profileDays days, the
// highest 1m arrival rate seen in it. A rise that the past days held for
// profileSustain (a level, not a burst) and that begins within the next
// start-up delay is ordered now, so the replicas for it are Ready when it
// comes; the trend sees it only once it is under way. The rise is the
// lowest of the past days', scaled down when today runs
// below them: a rise one day had is not a rise the next will have. It is
// ordered, not held: a rise that does not come is given back once the
// profile no longer says it is ahead. A group with no whole day of
// history plans as without.
const (
	profileSlot    = 10 * time.Minute
	profileSlots   = int(24 * time.Hour / profileSlot)
	profileDays    = 2
	profileSustain = 30 * time.Minute
	// unseen marks a slot with no cycle in it (the adapter was down).
	unseen = -1
)

// Profile is the group's arrivals by time of day.
type Profile struct {
	// Day is today (days since the Unix epoch, UTC) and Today its slots
	// so far; Past the earlier days, oldest first.
	Day   int64        `json:"day,omitempty"`
	Today []float64    `json:"today,omitempty"`
	Past  []ProfileDay `json:"past,omitempty"`
}

// ProfileDay is one day's highest 1m arrival rate per slot (unseen when
// no cycle ran in it).
type ProfileDay struct {
	Day   int64     `json:"day"`
	Peaks []float64 `json:"peaks"`
}

// dayAndSlot is t's day since the epoch and its slot within the day.
func dayAndSlot(t time.Time) (int64, int) {
	sec := t.Unix()
	day := sec / 86400
	if sec < 0 && sec%86400 != 0 {
		day--
	}
	return day, int((sec - day*86400) / int64(profileSlot/time.Second))
}

// record notes the arrival rate seen now. It returns a new Profile and
// leaves p (the previous cycle's state) unchanged.
func (p Profile) record(now time.Time, rate float64) Profile {
	day, slot := dayAndSlot(now)
	next := Profile{Day: day}
	for _, d := range p.Past {
		if day-d.Day <= profileDays {
			next.Past = append(next.Past, d)
		}
	}
	if p.Today != nil && p.Day < day && day-p.Day <= profileDays {
		next.Past = append(next.Past, ProfileDay{Day: p.Day, Peaks: p.Today})
		if len(next.Past) > profileDays {
			next.Past = next.Past[len(next.Past)-profileDays:]
		}
	}
	next.Today = make([]float64, profileSlots)
	if p.Today != nil && p.Day == day && len(p.Today) == profileSlots {
		copy(next.Today, p.Today)
	} else {
		for i := range next.Today {
			next.Today[i] = unseen
		}
	}
	next.Today[slot] = max(next.Today[slot], roundRate(rate))
	return next
}

// roundRate keeps three significant digits: the profile is persisted.
func roundRate(r float64) float64 {
	if r <= 0 {
		return 0
	}
	scale := math.Pow(10, 2-math.Floor(math.Log10(r)))
	return math.Round(r*scale) / scale
}

// slotsAhead is the slots from now's through now+span's.
func slotsAhead(now time.Time, span time.Duration) []int {
	_, first := dayAndSlot(now)
	intoSlot := time.Duration(now.Unix()%int64(profileSlot/time.Second)) * time.Second
	n := min(int((intoSlot+span)/profileSlot)+1, profileSlots)
	out := make([]int, n)
	for i := range out {
		out[i] = (first + i) % profileSlots
	}
	return out
}

// rise is the rise over cur the profile says begins within horizon (0
// when it says none, or has no day to say it from).
func (p Profile) rise(now time.Time, cur float64, horizon time.Duration) float64 {
	days := p.Past
	if len(days) == 0 {
		return 0
	}
	sustainSlots := int(profileSustain / profileSlot)
	// level is the rate all of days held from slot k for profileSustain
	// (unseen: not known).
	level := func(k int) float64 {
		lo := math.Inf(1)
		for _, d := range days {
			for i := 0; i < sustainSlots; i++ {
				v := d.Peaks[(k+i)%profileSlots]
				if v < 0 {
					return unseen
				}
				lo = min(lo, v)
			}
		}
		return lo
	}
	// Looking a slot past the start-up delay has the replicas Ready and
	// settled when a rise comes early in its slot.
	forecast := 0.0
	for _, k := range slotsAhead(now, horizon+profileSlot) {
		forecast = max(forecast, level(k))
	}
	// A quieter day than the past ones rises as much less: today's level
	// over the sustain before now's slot against theirs, read alike (a
	// rise under way in the slot now would read as a quiet day).
	_, slot := dayAndSlot(now)
	before := (slot - sustainSlots + profileSlots) % profileSlots
	if theirs := level(before); theirs > 0 && p.Today != nil {
		ours := math.Inf(1)
		for i := 0; i < sustainSlots; i++ {
			ours = min(ours, p.Today[(before+i)%profileSlots])
		}
		if ours >= 0 && ours < theirs {
			forecast *= ours / theirs
		}
	}
	return max(0, forecast-cur)
}

// trimOldestDay drops the oldest past day, for persisting under a bound.
func (p Profile) trimOldestDay() (Profile, bool) {
	if len(p.Past) == 0 {
		return p, false
	}
	p.Past = append([]ProfileDay(nil), p.Past[1:]...)
	return p, true
}
