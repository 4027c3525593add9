package sim

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
