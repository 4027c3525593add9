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
	// Smooth marks traffic without bursts (a daily curve, a ramp, steady
	// load): the planner's goals hold it to the stricter bounds of smooth
	// curves.
	Smooth bool
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

// WeekArgs is nine days from a Monday: five workdays, a weekend at the
// night's rate, and the next week's Monday and Tuesday, whose 09:00 rises
// only the same weekday a week before shows (the weekend before has
// none). Long answers make a few requests a second a fleet of several
// replicas within the simulator's bound on the requests of a trace.
var WeekArgs = []string{"--shape", "week", "--duration", "216h", "--base-rate", "0.25", "--peak-rate", "1.5", "--input-tokens", "3000", "--output-tokens", "1500"}

// Benchmark are the policy table's workloads, in its order.
var Benchmark = []Workload{
	{Name: "default (bursty)"},
	{Name: "spike", Args: []string{"--shape", "spike"}},
	{Name: "default, 30s start-up", Args: []string{"--startup-delay", "30s"}},
	{Name: "default, 7m start-up", Args: []string{"--startup-delay", "7m"}},
	{Name: "Azure conv x3", Args: Azure(Conv, AzureScale)},
	{Name: "Azure code x3", Args: Azure(Code, AzureScale)},
	{Name: "Azure conv x4.5", Args: Azure(Conv, 1.5*AzureScale)},
	{Name: "day (24 h, bursts)", Args: DayArgs, Long: true},
	{Name: "workdays (2 x 24 h, 09:00 rise, bursts)", Args: WorkdaysArgs, Long: true},
	{Name: "week (9 days, workdays and a quiet weekend)", Args: WeekArgs, Long: true},
	{Name: "ServeGen chat (m-mid, 00-12 h)", Args: []string{"--trace", ServegenChat}, Long: true},
	{Name: "ServeGen reasoning (deepseek-r1, 00-12 h)", Args: []string{"--trace", ServegenReason}, Long: true},
}

// HeldOut are workloads of the benchmark's kinds it does not hold: other
// seeds of its synthetic traffic, other rates of its traces, other
// start-ups, and shapes the planner was not developed on.
var HeldOut = []Workload{
	{Name: "bursty, seed 2", Args: []string{"--seed", "2"}},
	{Name: "bursty, seed 3, peak 40 req/s", Args: []string{"--seed", "3", "--peak-rate", "40"}},
	{Name: "bursty, seed 5", Args: []string{"--seed", "5"}},
	{Name: "spike, seed 2", Args: []string{"--shape", "spike", "--seed", "2"}},
	{Name: "bursty, 30s start-up, seed 2", Args: []string{"--startup-delay", "30s", "--seed", "2"}},
	{Name: "bursty, 30s start-up, seed 3", Args: []string{"--startup-delay", "30s", "--seed", "3"}},
	{Name: "bursty, 2m start-up, seed 2", Args: []string{"--startup-delay", "2m", "--seed", "2"}},
	{Name: "bursty, 7m start-up, seed 2", Args: []string{"--startup-delay", "7m", "--seed", "2"}},
	{Name: "Azure conv x2", Args: Azure(Conv, 2)},
	{Name: "Azure conv x3.5", Args: Azure(Conv, 3.5)},
	{Name: "Azure code x2", Args: Azure(Code, 2)},
	{Name: "diurnal", Args: []string{"--shape", "diurnal"}, Smooth: true},
	{Name: "ramp", Args: []string{"--shape", "ramp"}, Smooth: true},
	{Name: "steady", Args: []string{"--shape", "steady"}, Smooth: true},
	{Name: "day, seed 2", Args: append(append([]string(nil), DayArgs...), "--seed", "2"), Long: true},
	{Name: "day, seed 3", Args: append(append([]string(nil), DayArgs...), "--seed", "3"), Long: true},
	{Name: "day, 7m start-up", Args: append(append([]string(nil), DayArgs...), "--startup-delay", "7m"), Long: true},
	{Name: "workdays, seed 2", Args: append(append([]string(nil), WorkdaysArgs...), "--seed", "2"), Long: true},
	{Name: "ServeGen chat x1.5", Args: []string{"--trace", ServegenChat, "--rate-scale", "1.5"}, Long: true},
	{Name: "ServeGen reasoning x0.5", Args: []string{"--trace", ServegenReason, "--rate-scale", "0.5"}, Long: true},
}
