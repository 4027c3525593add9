// Package fleet is the discrete-event fleet one policy runs on: a
// vLLM-like server per pod (continuous batching, chunked prefill, KV cache
// in blocks, preemption), the router and the endpoint picker's flow
// control, Prometheus-style per-pod metric windows, the emulated HPA,
// start-up delays and the scale-from-zero path. A Policy drives it through
// what it observes (Now, ReadyPods, PendingPods, Held, ArrivalsOver, the
// pods' metrics) and SetReplicas. BenchReplica drives one server alone
// (`wva simulate replica`).
package fleet
