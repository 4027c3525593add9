// Package scenario is what one simulation is given: the fleet's variants
// and their model servers, the SLO, the emulated control loop, the traffic
// (a CSV trace or a synthetic shape) and each policy's settings; parsing,
// defaults and the ranges every field must lie in (bounds.go).
package scenario
