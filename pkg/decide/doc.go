// Package decide is the pure decision layer: everything between the
// cycle's inputs (VAs with their targets, the collected metrics, the
// resolved configuration) and the decisions of record in VA status. Time is
// an input; nothing here reads a clock, the cluster or Prometheus.
//
//   - inputs.go builds each variant group's input (BuildPlans).
//   - pipeline.go composes the stages for a set of groups: analyze ->
//     optimize -> enforce. The adapter's engine, the simulator and
//     `wva decide` all call it, so they decide identically.
//   - the optimizer subpackage turns analyzer signals into per-variant
//     replica targets. It stays a package of its own because the
//     analyzers' tests run their signals through it, and this package
//     imports the analyzers.
//   - enforcer.go applies the policies after the optimizer: replica bounds,
//     scale to zero for idle groups, and the fallback / retention /
//     last-resort hierarchy (docs/design.md#fallback-retention-and-last-resort)
//     when metrics are missing.
//   - status.go, stuck.go and configcond.go build the VA status a decision
//     leads to.
package decide
