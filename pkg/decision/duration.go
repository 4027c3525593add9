package decision

import (
	"math"
	"time"
)

// Durations derived from user input (a startupProbe's failureThreshold x
// periodSeconds, a snapshot's startupAllowance) can be near the int64 limit;
// a wrapped sum or product turns a long grace into a negative one. These
// helpers saturate at the limits instead.

// AddDurations returns a + b, saturated at the time.Duration range.
func AddDurations(a, b time.Duration) time.Duration {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}

// MulDuration returns d x n, saturated at the time.Duration range.
func MulDuration(d time.Duration, n int64) time.Duration {
	if d == 0 || n == 0 {
		return 0
	}
	p := d * time.Duration(n)
	if p/time.Duration(n) != d || (d == math.MinInt64 && n == -1) {
		if (d > 0) == (n > 0) {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return p
}
