package fleet

import (
	"slices"
)

// Summary is a run's figures, measured from the origin (after the warm-up)
// to the cost horizon.
type Summary struct {
	// Cost is the sum over variants of cost x replica-hours, counting every
	// pod from creation (model load included) to deletion.
	Cost         float64
	ReplicaHours map[string]float64
	Requests     int
	// SLOAttainment is the fraction of requests with TTFT and average ITL
	// within the targets (requests rejected or never finished miss).
	SLOAttainment                    float64
	TTFTp50, TTFTp99, ITLp50, ITLp99 float64
	// ScaleEvents counts changes of any variant's spec.replicas.
	ScaleEvents  int
	MeanReplicas float64
	MaxReplicas  int32
	Preemptions  int64
	Rejected     int
	Unfinished   int
	// EngineSteps is how many server iterations were simulated.
	EngineSteps int64
	Timeline    []TimePoint
	Variants    []string
}

// Summarize sums up the run (call it after Run).
func (f *Fleet) Summarize() Summary {
	s := Summary{ReplicaHours: map[string]float64{}, Requests: len(f.results) - f.skip, Timeline: f.timeline,
		Preemptions: f.preemptions, EngineSteps: f.steps64}
	for _, vs := range f.variants {
		s.ScaleEvents += vs.events
		s.Variants = append(s.Variants, vs.spec.Name)
	}
	for _, p := range f.pods {
		end := f.costEnd
		if p.gone {
			end = min(end, p.goneAt)
		}
		start := max(p.created, f.origin)
		if end <= start {
			continue
		}
		hours := (end - start).Hours()
		spec := f.sc.Variants[p.variant]
		s.ReplicaHours[spec.Name] += hours
		s.Cost += hours * spec.Cost
	}
	var total float64
	for _, h := range s.ReplicaHours {
		total += h
	}
	if f.costEnd > f.origin {
		s.MeanReplicas = total / (f.costEnd - f.origin).Hours()
	}
	for _, tp := range f.timeline {
		var n int32
		for _, r := range tp.Replicas {
			n += r
		}
		s.MaxReplicas = max(s.MaxReplicas, n)
	}
	ttft := make([]float64, 0, len(f.results))
	itl := make([]float64, 0, len(f.results))
	met := 0
	for i, r := range f.results {
		if i < f.skip {
			continue
		}
		switch r.state {
		case reqRejected:
			s.Rejected++
			continue
		case reqDone:
		default:
			s.Unfinished++
			continue
		}
		ttft = append(ttft, float64(r.ttft))
		if f.trace.Requests[i].Output > 1 {
			itl = append(itl, float64(r.itl))
		}
		if f.Met(i) {
			met++
		}
	}
	if s.Requests > 0 {
		s.SLOAttainment = float64(met) / float64(s.Requests)
	}
	slices.Sort(ttft)
	slices.Sort(itl)
	s.TTFTp50, s.TTFTp99 = percentileSorted(ttft, 0.50), percentileSorted(ttft, 0.99)
	s.ITLp50, s.ITLp99 = percentileSorted(itl, 0.50), percentileSorted(itl, 0.99)
	return s
}
