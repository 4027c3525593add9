// Package workloads names the `wva simulate` workloads wva is judged on:
// the benchmark's, whose tables hack/benchreport writes, and held-out ones
// of the same kinds (other seeds, rates and start-ups), on which
// hack/plannersuite compares two builds of wva beside them. A planner
// change is judged on both: one that only helps the benchmark's draws fits
// them.
package workloads

import "fmt"

// Workload is `wva simulate` with Args. A long workload (a day) runs every
// policy once in the benchmark, without the frontier sweep or the token
// analyzer's row, which would cost tens of minutes.
type Workload struct {
	Name string
	Args []string
	Long bool
}

const (
	Conv = "examples/traces/azure-llm-inference-2023-conv.csv"
	Code = "examples/traces/azure-llm-inference-2023-code.csv"
	// ServeGen-derived half days (examples/traces/README.md).
	ServegenChat   = "examples/traces/servegen-m-mid-00-12h.csv.gz"
	ServegenReason = "examples/traces/servegen-deepseek-r1-00-12h.csv.gz"
	// AzureScale sizes the Azure traces to the calibrated fleet: at their
	// own rate (about 5 req/s) one replica serves either.
	AzureScale = 3.0
)

// Azure plays an Azure trace at scale times its rate.
func Azure(trace string, scale float64) []string {
	return []string{"--trace", trace, "--rate-scale", fmt.Sprintf("%g", scale)}
}

// DayArgs is the synthetic day: 24 hours from midnight with bursts, chat
// requests of 2000 prompt and 400 output tokens.
var DayArgs = []string{"--shape", "day", "--duration", "24h", "--base-rate", "1.5", "--peak-rate", "9", "--input-tokens", "2000", "--output-tokens", "400"}

// WorkdaysArgs is two workdays: a rise at 09:00 that every day has, bursts
// that each day has at its own times (the same requests as the day's).
var WorkdaysArgs = []string{"--shape", "workday", "--duration", "48h", "--base-rate", "0.8", "--peak-rate", "4.8", "--input-tokens", "2000", "--output-tokens", "400"}

// Benchmark are the policy table's workloads, in its order.
var Benchmark = []Workload{
	{"default (bursty)", nil, false},
	{"spike", []string{"--shape", "spike"}, false},
	{"default, 30s start-up", []string{"--startup-delay", "30s"}, false},
	{"default, 7m start-up", []string{"--startup-delay", "7m"}, false},
	{"Azure conv x3", Azure(Conv, AzureScale), false},
	{"Azure code x3", Azure(Code, AzureScale), false},
	{"Azure conv x4.5", Azure(Conv, 1.5*AzureScale), false},
	{"day (24 h, bursts)", DayArgs, true},
	{"workdays (2 x 24 h, 09:00 rise, bursts)", WorkdaysArgs, true},
	{"ServeGen chat (m-mid, 00-12 h)", []string{"--trace", ServegenChat}, true},
	{"ServeGen reasoning (deepseek-r1, 00-12 h)", []string{"--trace", ServegenReason}, true},
}

// HeldOut are workloads of the benchmark's kinds it does not hold: other
// seeds of its synthetic traffic, other rates of its traces, other
// start-ups, and shapes the planner was not developed on.
var HeldOut = []Workload{
	{"bursty, seed 2", []string{"--seed", "2"}, false},
	{"bursty, seed 3, peak 40 req/s", []string{"--seed", "3", "--peak-rate", "40"}, false},
	{"bursty, seed 5", []string{"--seed", "5"}, false},
	{"spike, seed 2", []string{"--shape", "spike", "--seed", "2"}, false},
	{"bursty, 30s start-up, seed 2", []string{"--startup-delay", "30s", "--seed", "2"}, false},
	{"bursty, 30s start-up, seed 3", []string{"--startup-delay", "30s", "--seed", "3"}, false},
	{"bursty, 2m start-up, seed 2", []string{"--startup-delay", "2m", "--seed", "2"}, false},
	{"bursty, 7m start-up, seed 2", []string{"--startup-delay", "7m", "--seed", "2"}, false},
	{"Azure conv x2", Azure(Conv, 2), false},
	{"Azure conv x3.5", Azure(Conv, 3.5), false},
	{"Azure code x2", Azure(Code, 2), false},
	{"diurnal", []string{"--shape", "diurnal"}, false},
	{"ramp", []string{"--shape", "ramp"}, false},
	{"steady", []string{"--shape", "steady"}, false},
	{"day, seed 2", append(append([]string(nil), DayArgs...), "--seed", "2"), true},
	{"day, seed 3", append(append([]string(nil), DayArgs...), "--seed", "3"), true},
	{"day, 7m start-up", append(append([]string(nil), DayArgs...), "--startup-delay", "7m"), true},
	{"workdays, seed 2", append(append([]string(nil), WorkdaysArgs...), "--seed", "2"), true},
	{"ServeGen chat x1.5", []string{"--trace", ServegenChat, "--rate-scale", "1.5"}, true},
	{"ServeGen reasoning x0.5", []string{"--trace", ServegenReason, "--rate-scale", "0.5"}, true},
}
