package fleet

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/wva-project/wva/pkg/sim/scenario"
)

// ReplicaPoint is one replica driven at a fixed concurrency, as AIPerf,
// genai-perf and `vllm bench serve --max-concurrency` drive a server: each
// of Concurrency clients sends a request, waits for its last token and sends
// the next at once. Latencies are means over the measured requests.
type ReplicaPoint struct {
	Concurrency int `json:"concurrency,omitempty"`
	// RequestRate is the offered load of a rate-driven point (req/s), 0
	// for a concurrency-driven one.
	RequestRate float64 `json:"requestRate,omitempty"`
	// TTFTMs is arrival to first token, queueing in the engine included.
	TTFTMs float64 `json:"ttftMs"`
	// ITLMs is a request's (last token - first token) / (output - 1),
	// averaged over requests (AIPerf's inter-token latency).
	ITLMs float64 `json:"itlMs"`
	// OutputTokensPerSecond is the replica's output token throughput.
	OutputTokensPerSecond float64 `json:"outputTokensPerSecond"`
}

// Bounds of one replica benchmark: far beyond any published table, small
// enough that a point costs well under a second of CPU.
const (
	MaxBenchConcurrency = 4096
	MaxBenchTokens      = 1 << 20
	MaxBenchRate        = 10_000.0
)

// replicaRequests is how many requests a point measures (after as many
// again of warm-up): every client's request is seen several times over, so
// the synchronized start (all clients arrive at once) has washed out.
func replicaRequests(concurrency int) int { return max(8*concurrency, 64) }

// benchServer is the replica a benchmark drives: spec with vLLM's
// defaults, refusing requests outside the bench's bounds or larger than
// its KV cache, as vLLM refuses a request over its max model length.
func benchServer(spec scenario.ServerSpec, in, out int32) (*server, error) {
	switch {
	case in < 1 || in > MaxBenchTokens:
		return nil, fmt.Errorf("input tokens %d: must be in [1, %d]", in, MaxBenchTokens)
	case out < 1 || out > MaxBenchTokens:
		return nil, fmt.Errorf("output tokens %d: must be in [1, %d]", out, MaxBenchTokens)
	}
	spec = spec.WithDefaults()
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	s := newServer(spec)
	if !s.fits(in, out) {
		return nil, fmt.Errorf("a request of %d+%d tokens exceeds the replica's KV cache (%d tokens)", in, out, spec.KVCapacityTokens())
	}
	return s, nil
}

// aloneMs is about one request's time alone on the replica, in ms: the
// time scale a benchmark's clients and arrivals are spread over.
func aloneMs(spec scenario.ServerSpec, in, out int32) float64 {
	return (spec.Overhead+spec.Alpha)*float64(out) + spec.Beta*float64(in+out)
}

// BenchReplica drives one replica of spec at a fixed concurrency with
// identical requests of in prompt and out output tokens. It refuses a
// request the replica's KV cache cannot hold, as vLLM refuses a request
// over its max model length.
func BenchReplica(spec scenario.ServerSpec, in, out int32, concurrency int) (ReplicaPoint, error) {
	switch {
	case concurrency < 1 || concurrency > MaxBenchConcurrency:
		return ReplicaPoint{}, fmt.Errorf("concurrency %d: must be in [1, %d]", concurrency, MaxBenchConcurrency)
	}
	s, err := benchServer(spec, in, out)
	if err != nil {
		return ReplicaPoint{}, err
	}

	measured := replicaRequests(concurrency)
	warm := measured
	// Clients start at random points of one request's time alone on the
	// replica (seeded: a point is reproducible). Started at once, identical
	// requests would stay in lockstep forever, a deterministic engine having
	// none of a real one's jitter; evenly spaced, they would never collide.
	alone := aloneMs(s.spec, in, out) * float64(time.Millisecond)
	rng := rand.New(rand.NewPCG(uint64(concurrency), uint64(in)<<32|uint64(out)))
	starts := make([]time.Duration, concurrency)
	for i := 1; i < concurrency; i++ {
		starts[i] = time.Duration(rng.Float64() * alone)
	}
	slices.Sort(starts)
	var now time.Duration
	issued, started, seen := 0, 0, 0
	submit := func(at time.Duration) {
		// A request's index orders it: the first warm ones are not measured.
		s.enqueue(&seq{req: int32(issued), arrival: at, input: in, output: out, prompt: in, firstToken: -1})
		issued++
	}

	var ttft, itl, e2e time.Duration
	var done []*seq
	for seen < measured {
		for started < concurrency && starts[started] <= now {
			submit(starts[started])
			started++
		}
		d, ok := s.schedule(now)
		if !ok {
			if started < concurrency {
				now = starts[started]
				continue
			}
			// Every request fits an empty cache, so an idle engine with
			// clients waiting would be a defect of the model.
			return ReplicaPoint{}, fmt.Errorf("the engine stalled with %d requests waiting", s.numWaiting())
		}
		now += d
		done = s.complete(now, done[:0])
		for _, q := range done {
			if int(q.req) >= warm && int(q.req) < warm+measured {
				seen++
				ttft += q.firstToken - q.arrival
				e2e += now - q.arrival
				if out > 1 {
					itl += (now - q.firstToken) / time.Duration(out-1)
				}
			}
			// Clients keep sending until the measured requests are done, so
			// the last of them run beside as many others as the first.
			submit(now)
		}
	}
	n := float64(measured)
	meanE2E := e2e.Seconds() / n
	return ReplicaPoint{
		Concurrency: concurrency,
		TTFTMs:      millis(ttft) / n,
		ITLMs:       millis(itl) / n,
		// Little's law on a closed loop: concurrency requests in flight,
		// each in flight for the mean end-to-end latency.
		OutputTokensPerSecond: float64(concurrency) * float64(out) / meanE2E,
	}, nil
}

// BenchReplicaRate drives one replica of spec with identical requests
// arriving at rate per second, Poisson (seeded), as `vllm bench serve
// --request-rate` does. Latencies are means over the measured requests;
// throughput is every finished request's output tokens over the run's
// duration, as vllm bench serve reports it. A rate beyond the replica's
// capacity queues without bound, and TTFT shows it.
func BenchReplicaRate(spec scenario.ServerSpec, in, out int32, rate float64) (ReplicaPoint, error) {
	switch {
	case !(rate > 0 && rate <= MaxBenchRate):
		return ReplicaPoint{}, fmt.Errorf("request rate %v: must be in (0, %v] req/s", rate, MaxBenchRate)
	}
	s, err := benchServer(spec, in, out)
	if err != nil {
		return ReplicaPoint{}, err
	}
	// As many requests as are in flight at once, several times over, once
	// a request's time alone says how many that is.
	measured := replicaRequests(int(math.Ceil(rate * aloneMs(s.spec, in, out) / 1000)))
	warm := measured
	rng := rand.New(rand.NewPCG(math.Float64bits(rate), uint64(in)<<32|uint64(out)))
	reqs := make([]*seq, warm+measured)
	var at float64
	for i := range reqs {
		at += rng.ExpFloat64() / rate
		reqs[i] = &seq{req: int32(i), arrival: time.Duration(at * float64(time.Second)), input: in, output: out, prompt: in, firstToken: -1}
	}
	finished := 0
	var ttft, itl time.Duration
	now, err := driveOpen(s, reqs, warm, measured, func(q *seq, now time.Duration) {
		finished++
		if int(q.req) >= warm {
			ttft += q.firstToken - q.arrival
			if out > 1 {
				itl += (now - q.firstToken) / time.Duration(out-1)
			}
		}
	})
	if err != nil {
		return ReplicaPoint{}, err
	}
	n := float64(measured)
	return ReplicaPoint{
		RequestRate:           rate,
		TTFTMs:                millis(ttft) / n,
		ITLMs:                 millis(itl) / n,
		OutputTokensPerSecond: float64(finished) * float64(out) / now.Seconds(),
	}, nil
}

// driveOpen runs s on reqs, in arrival order, each enqueued at its
// arrival (an open loop: arrivals wait for nothing), until measured of the
// requests from index warm on have finished. finish sees every request
// that finishes, warm-up ones too, and the time it finished; driveOpen
// returns the time the last measured one did.
func driveOpen(s *server, reqs []*seq, warm, measured int, finish func(q *seq, now time.Duration)) (time.Duration, error) {
	var now time.Duration
	next, seen := 0, 0
	var done []*seq
	for seen < measured {
		for next < len(reqs) && reqs[next].arrival <= now {
			s.enqueue(reqs[next])
			next++
		}
		d, ok := s.schedule(now)
		if !ok {
			if next < len(reqs) {
				now = reqs[next].arrival
				continue
			}
			return now, fmt.Errorf("the engine stalled with %d requests waiting", s.numWaiting())
		}
		now += d
		done = s.complete(now, done[:0])
		for _, q := range done {
			if int(q.req) >= warm {
				seen++
			}
			finish(q, now)
		}
	}
	return now, nil
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// ReplicaReport is `wva simulate replica`'s answer: each variant's points,
// in the scenario's order.
type ReplicaReport struct {
	Variants []ReplicaVariant `json:"variants"`
}

// ReplicaVariant is one variant's replica benchmark.
type ReplicaVariant struct {
	Name string `json:"name"`
	// Hardware is the scenario's description of what one replica runs on
	// (its accelerator when the scenario says no more).
	Hardware string         `json:"hardware"`
	Points   []ReplicaPoint `json:"points"`
}

// BenchScenario benchmarks one replica of each of the scenario's variants
// (or of the one named) at each concurrency.
func BenchScenario(sc scenario.Scenario, variant string, in, out int32, concurrencies []int) (ReplicaReport, error) {
	var rep ReplicaReport
	for _, v := range sc.Variants {
		if variant != "" && v.Name != variant {
			continue
		}
		rv := ReplicaVariant{Name: v.Name, Hardware: v.HardwareDescription()}
		for _, c := range concurrencies {
			p, err := BenchReplica(v.Server, in, out, c)
			if err != nil {
				return ReplicaReport{}, fmt.Errorf("variant %s: %w", v.Name, err)
			}
			rv.Points = append(rv.Points, p)
		}
		rep.Variants = append(rep.Variants, rv)
	}
	if len(rep.Variants) == 0 {
		return ReplicaReport{}, fmt.Errorf("the scenario has no variant %q", variant)
	}
	return rep, nil
}
