// Package sim is the fleet simulator behind `wva simulate`: a vLLM-like
// engine per pod (continuous batching, chunked prefill, KV cache in blocks,
// preemption), Prometheus-style metric windows, the HPA, start-up delays and
// the scale-from-zero path, driven by traffic from a scenario or a trace.
// Each policy (wva through the real decision pipeline, its peers, constant
// fleets and the offline oracle) runs on its own copy of the fleet, and Run
// reports cost, SLO attainment and latency per policy, with wva's verdict
// against the other rows.
package sim
