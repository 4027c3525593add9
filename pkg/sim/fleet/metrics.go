package fleet

import (
	"math"
	"sort"
	"time"
)

// lookback is Prometheus' instant-query lookback (a series is visible for
// 5 minutes after its last sample) and the window of the 5m averages.
const lookback = 5 * time.Minute

// sample is one scrape of one pod's vLLM /metrics.
type sample struct {
	at      time.Duration
	kv      float64 // vllm:kv_cache_usage_perc
	waiting float64 // vllm:num_requests_waiting
	running float64 // vllm:num_requests_running
	// Counters: vllm:request_success_total and the sums of the
	// request_prompt_tokens / request_generation_tokens histograms.
	finished    int64
	finishedIn  int64
	finishedOut int64
	// Requests dispatched to the pod (the EPP's scheduler attempts) and
	// the TTFT / ITL histogram sums and counts.
	arrived   int64
	ttftSum   float64
	ttftCount int64
	itlSum    float64
	itlCount  int64
	tpot      tpotCounts
	queue     queueCounts
	ttft      ttftCounts
}

// QueueBounds are the upper bounds (seconds) of vLLM's
// request_queue_time_seconds histogram, the last +Inf.
var QueueBounds = [...]float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680, math.Inf(1)}

type queueCounts [len(QueueBounds)]int64

func (c *queueCounts) observe(seconds float64) { observeBucket(QueueBounds[:], c[:], seconds) }

// TPOTBounds are the upper bounds (seconds) of vLLM's per-request
// time-per-output-token histogram, the last +Inf.
var TPOTBounds = [...]float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, math.Inf(1)}

// tpotCounts is a histogram's per-bucket (not cumulative) counters.
type tpotCounts [len(TPOTBounds)]int64

func (c *tpotCounts) observe(seconds float64) { observeBucket(TPOTBounds[:], c[:], seconds) }

// TTFTBounds are the upper bounds (seconds) of vLLM's
// time_to_first_token_seconds histogram, the last +Inf.
var TTFTBounds = [...]float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0, math.Inf(1)}

type ttftCounts [len(TTFTBounds)]int64

func (c *ttftCounts) observe(seconds float64) { observeBucket(TTFTBounds[:], c[:], seconds) }

// observeBucket counts one observation in the first bucket whose upper
// bound holds it.
func observeBucket(bounds []float64, counts []int64, seconds float64) {
	i := sort.SearchFloat64s(bounds, seconds)
	counts[min(i, len(counts)-1)]++
}

// series is the samples Prometheus holds for one pod, trimmed to the
// longest window any query uses.
type series struct {
	samples []sample
}

func (s *series) add(x sample) {
	cut := 0
	for cut < len(s.samples) && x.at-s.samples[cut].at > lookback {
		cut++
	}
	if cut > 0 {
		s.samples = append(s.samples[:0], s.samples[cut:]...)
	}
	s.samples = append(s.samples, x)
}

// maxOverTime is max_over_time(gauge[window]) at now for KV usage and queue
// length: samples in (now-window, now]. ok is false when the range is empty
// (the pod does not report yet).
func (s *series) maxOverTime(now, window time.Duration) (kv, waiting float64, ok bool) {
	for i := len(s.samples) - 1; i >= 0; i-- {
		x := s.samples[i]
		if x.at > now {
			continue
		}
		if now-x.at >= window {
			break
		}
		if !ok {
			kv, waiting, ok = x.kv, x.waiting, true
			continue
		}
		kv, waiting = math.Max(kv, x.kv), math.Max(waiting, x.waiting)
	}
	return kv, waiting, ok
}

// latest is an instant query: the newest sample at or before now within the
// lookback.
func (s *series) latest(now time.Duration) (sample, bool) {
	for i := len(s.samples) - 1; i >= 0; i-- {
		x := s.samples[i]
		if x.at > now {
			continue
		}
		return x, now-x.at <= lookback
	}
	return sample{}, false
}

// tokenAverages are the 5m per-request averages of prompt and generation
// tokens (ratio of counter increases); ok is false when no request finished
// in the window.
func (s *series) tokenAverages(now time.Duration) (in, out float64, ok bool) {
	last, found := s.latest(now)
	if !found {
		return 0, 0, false
	}
	first := last
	for _, x := range s.samples {
		if x.at <= now && now-x.at <= lookback {
			first = x
			break
		}
	}
	n := last.finished - first.finished
	if n <= 0 {
		return 0, 0, false
	}
	return float64(last.finishedIn-first.finishedIn) / float64(n), float64(last.finishedOut-first.finishedOut) / float64(n), true
}

// WindowRates is what rate()-style queries over a window return for one
// pod: the arrival rate and the mean TTFT and ITL of the window (zero when
// no observation fell in it).
type WindowRates struct {
	ArrivalRate float64
	TTFT, ITL   float64 // seconds
	// TPOT is the per-request time-per-output-token histogram as rate()
	// of its buckets returns it: the cumulative requests per second at or
	// below each of TPOTBounds; nil when none finished in the window.
	TPOT []float64
	// Queue is the queue-time histogram the same way (QueueBounds).
	Queue []float64
	// TTFTBuckets is the TTFT histogram the same way (TTFTBounds).
	TTFTBuckets []float64
}

// rates computes per-second rates and histogram means over (now-window,
// now] from the first and last samples in the window, as rate() does
// (without extrapolation); ok is false with fewer than two samples.
func (s *series) rates(now, window time.Duration) (WindowRates, bool) {
	var first, last *sample
	for i := range s.samples {
		x := &s.samples[i]
		if x.at > now || now-x.at >= window {
			continue
		}
		if first == nil {
			first = x
		}
		last = x
	}
	if first == nil || last == first {
		return WindowRates{}, false
	}
	var w WindowRates
	w.ArrivalRate = float64(last.arrived-first.arrived) / (last.at - first.at).Seconds()
	if n := last.ttftCount - first.ttftCount; n > 0 {
		w.TTFT = (last.ttftSum - first.ttftSum) / float64(n)
	}
	secs := (last.at - first.at).Seconds()
	if n := last.itlCount - first.itlCount; n > 0 {
		w.ITL = (last.itlSum - first.itlSum) / float64(n)
		w.TPOT = bucketRates(last.tpot[:], first.tpot[:], secs)
	}
	if q := bucketRates(last.queue[:], first.queue[:], secs); q[len(q)-1] > 0 {
		w.Queue = q
	}
	if t := bucketRates(last.ttft[:], first.ttft[:], secs); t[len(t)-1] > 0 {
		w.TTFTBuckets = t
	}
	return w, true
}

// bucketRates is rate() of a histogram's buckets between two samples of
// its per-bucket counters: the cumulative count per second at or below
// each bound.
func bucketRates(last, first []int64, secs float64) []float64 {
	out := make([]float64, len(last))
	var cum int64
	for i := range last {
		cum += last[i] - first[i]
		out[i] = float64(cum) / secs
	}
	return out
}

// completionLog is the model's vllm:request_success_total over time, for
// increase(...[retention]) (idle detection).
type completionLog struct {
	at []time.Duration // sorted: the simulated clock only moves forward
}

func (c *completionLog) add(t time.Duration) { c.at = append(c.at, t) }

// over counts completions in (now-window, now].
func (c *completionLog) over(now, window time.Duration) float64 {
	lo := sort.Search(len(c.at), func(i int) bool { return c.at[i] > now-window })
	hi := sort.Search(len(c.at), func(i int) bool { return c.at[i] > now })
	return float64(hi - lo)
}
