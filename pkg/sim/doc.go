// Package sim is the fleet simulator behind `wva simulate`: Run plays the
// traffic of a scenario (pkg/sim/scenario) for each policy
// (pkg/sim/policies: wva through the real decision pipeline, its peers and
// constant fleets; pkg/sim/oracle: the offline oracle and static-frontier),
// each on its own copy of the fleet (pkg/sim/fleet), and reports cost, SLO
// attainment and latency per policy, with wva's verdict against the other
// rows; SweepFrontiers moves each policy's one knob. pkg/sim/report renders
// the report.
package sim
