package planner

import (
	"math"
	"time"
)

// Users run for weeks, and most of their traffic keeps the hours of the
// people behind it. The profile is the group's arrivals by time of day
// (UTC), learned from its own history and persisted with the planner's
// state: for each profileSlot of each of the last profileWeeks weeks'
// days, the highest 1m arrival rate seen in it. The days that tell today's
// rises are the same weekday of the past weeks where any is known (a
// Monday's rise after a quiet weekend, no Saturday rise after a week of
// them), else the last profileDays days. A rise that those days held for
// profileSustain (a level, not a burst) and that begins within the next
// start-up delay is ordered now, so the replicas for it are Ready when it
// comes; the trend sees it only once it is under way. The rise is the
// lowest of the past days', scaled to today by how today's level compares
// with theirs: a quieter day rises as much less, a busier one as much
// more, and a rise one day had is not a rise the next will have. It is
// ordered, not held: a rise that does not come is given back once the
// profile no longer says it is ahead. A group with no whole day of
// history plans as without.
const (
	profileSlot  = 10 * time.Minute
	profileSlots = int(24 * time.Hour / profileSlot)
	profileDays  = 2
	profileWeeks = 2
	// profileHistory is the days kept: every weekday of profileWeeks.
	profileHistory = 7 * profileWeeks
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
		if day-d.Day <= profileHistory {
			next.Past = append(next.Past, d)
		}
	}
	if p.Today != nil && p.Day < day && day-p.Day <= profileHistory {
		next.Past = append(next.Past, ProfileDay{Day: p.Day, Peaks: p.Today})
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

// daysLikeToday are the past days that tell today's rises: the same
// weekday of the past weeks where any is known, else the last profileDays
// days. Weekly evidence takes over whole, not mixed with the days before:
// "the lowest of them" over a Sunday and the Monday before would never
// order a Monday's rise.
func (p Profile) daysLikeToday() []ProfileDay {
	var weekly, recent []ProfileDay
	for _, d := range p.Past {
		switch ago := p.Day - d.Day; {
		case ago > 0 && ago%7 == 0:
			weekly = append(weekly, d)
		case ago > 0 && ago <= profileDays:
			recent = append(recent, d)
		}
	}
	if len(weekly) > 0 {
		return weekly
	}
	return recent
}

// rise is the rise the profile says begins within horizon (0 when it says
// none, or has no day to say it from).
func (p Profile) rise(now time.Time, horizon time.Duration) float64 {
	days := p.daysLikeToday()
	if len(days) == 0 || len(p.Today) != profileSlots {
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
	// Today's level against the past days' over the half hour before
	// now's slot, both read as the lowest slot peak (a rise under way in
	// the slot now would read as a quiet day, and one 1m rate against a
	// slot's highest as a rise): the rise is theirs scaled to today.
	_, slot := dayAndSlot(now)
	before := (slot - sustainSlots + profileSlots) % profileSlots
	theirs := level(before)
	ours := math.Inf(1)
	for i := 0; i < sustainSlots; i++ {
		ours = min(ours, p.peakToday((before+i)%profileSlots, slot))
	}
	if theirs < 0 || ours < 0 {
		return 0
	}
	// Looking a slot past the start-up delay has the replicas Ready and
	// settled when a rise comes early in its slot.
	ahead := 0.0
	for _, k := range slotsAhead(now, horizon+profileSlot) {
		ahead = max(ahead, level(k))
	}
	if theirs == 0 {
		// From an idle night: nothing to scale by.
		return max(0, ahead-ours)
	}
	return max(0, ours*ahead/theirs-ours)
}

// peakToday is today's peak in slot k, read from yesterday when k comes
// after now's slot (the half hour before just after midnight).
func (p Profile) peakToday(k, now int) float64 {
	if k <= now {
		return p.Today[k]
	}
	if n := len(p.Past); n > 0 && p.Past[n-1].Day == p.Day-1 {
		return p.Past[n-1].Peaks[k]
	}
	return unseen
}

// trimOldestDay drops the oldest past day, for persisting under a bound.
func (p Profile) trimOldestDay() (Profile, bool) {
	if len(p.Past) == 0 {
		return p, false
	}
	p.Past = append([]ProfileDay(nil), p.Past[1:]...)
	return p, true
}
