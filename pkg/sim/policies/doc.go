// Package policies holds the control planes the simulator compares, each a
// fleet.Policy: wva's own (the real decision pipeline, as the adapter and
// the controller run it) and its peers, wva-v1, wva-throughput,
// queue-threshold (KEDA-style), kpa (Knative's KPA) and the constant
// fleets; with the policy names and ParsePolicies.
package policies
