// Package oracle is the simulator's offline lower bound on cost: per
// interval the cheapest mix of variants that meets the SLO on that
// interval's requests (knowing the whole trace), then repaired until the
// plan replayed with no start-up delay meets the SLO; the policy that
// replays it; and static-frontier's constant fleets, the cheapest mixes
// per capacity.
package oracle
