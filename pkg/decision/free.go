package decision

// Free is, per accelerator type (the node label value, e.g.
// "NVIDIA-H100-80GB-HBM3"), how many GPUs new replicas may take this cycle:
// what the limiter (enableLimiter) shares out. An accelerator absent from
// Free is not limited.
type Free map[string]int64

// Copy returns an independent copy (nil stays nil).
func (f Free) Copy() Free {
	if f == nil {
		return nil
	}
	out := make(Free, len(f))
	for k, v := range f {
		out[k] = v
	}
	return out
}

// Spend subtracts the GPUs that targets add over the group's current
// replicas (scale-ups elsewhere, decided without the limiter).
func (f Free) Spend(g Group, targets []Target) {
	for acc, n := range AddedGPUs(g, targets) {
		if _, ok := f[acc]; ok {
			f[acc] -= n
		}
	}
}

// AddedGPUs is what targets add over current replicas, per accelerator.
func AddedGPUs(g Group, targets []Target) map[string]int64 {
	out := map[string]int64{}
	for _, t := range targets {
		if v, ok := g.Variant(t.Variant); ok && t.Replicas > v.CurrentReplicas {
			out[v.Accelerator] += int64(t.Replicas-v.CurrentReplicas) * GPUsPerReplica(v)
		}
	}
	return out
}

// GPUsPerReplica is a variant's GPUs per replica; unknown (0) counts as 1
// so that the limiter never under-counts.
func GPUsPerReplica(v Variant) int64 {
	if v.GPUsPerReplica > 0 {
		return int64(v.GPUsPerReplica)
	}
	return 1
}
