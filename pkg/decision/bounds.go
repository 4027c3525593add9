package decision

import "math"

// Physical bounds of the metric values the analyzers read, shared by the
// collector (which drops a sample above its bound) and the snapshot
// validator (which rejects one). They are far above anything a real fleet
// reports and low enough that sums and products of them stay finite: a
// finite 1.7e308 would overflow to +Inf inside the analyzers and turn a
// plan into NaN.
const (
	// MaxTokens bounds token counts and per-request token averages.
	MaxTokens = 1e9
	// MaxGPUBlocks and MaxBlockSize bound vllm:cache_config_info.
	MaxGPUBlocks = 1e9
	MaxBlockSize = 65536
	// MaxQueueLength bounds the requests waiting at one pod.
	MaxQueueLength = 1e6
	// MaxArrivalRate bounds a request rate (req/s), at one pod or at the
	// gateway for one model.
	MaxArrivalRate = 1e6
	// MaxLatencyMs bounds mean TTFT and ITL: one hour.
	MaxLatencyMs = 36e5
	// MaxSchedulerQueue and MaxSchedulerQueueBytes bound the EPP
	// flow-control queue of one model.
	MaxSchedulerQueue      = 1e9
	MaxSchedulerQueueBytes = 1e15
	// MaxRequestCount bounds the requests counted over a retention window
	// (MaxArrivalRate over the longest idle window, 7 days, is 6e11).
	MaxRequestCount = 1e12
)

// Finite reports whether x is neither NaN nor ±Inf: a metric value the
// analyzers may compute with.
func Finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// Clamp01 bounds a share (a hit rate, a fraction of requests) to [0, 1].
func Clamp01(x float64) float64 { return math.Min(1, math.Max(0, x)) }
