// Package des is a small discrete-event simulation of one continuous-batching
// model server, used only by tests to validate the queueing model against.
// It is deterministic for a given seed.
//
// The server works in engine iterations, as vLLM does: at the start of an
// iteration waiting requests join the batch (FIFO, up to MaxBatch); a request
// that has just joined runs its whole prompt (prefill) in that iteration and
// gets its first token at the end of it; every other request in the batch
// decodes one token. An iteration lasts
//
//	alpha + beta*(tokens computed) + gamma*(tokens of context read)
//
// where a prefilling request computes and reads its I prompt tokens and a
// decoding one computes 1 token and reads its context (prompt plus tokens
// generated so far). A request leaves after O decode iterations. Arrivals
// are Poisson; an arrival that finds MaxBatch+MaxQueue requests in the
// server is dropped. TTFT is measured from arrival to the end of the prefill
// iteration; ITL is the mean duration of decode iterations weighted by the
// tokens they produce (what vLLM's inter-token histogram averages).
package des

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Config describes the server and its load.
type Config struct {
	Alpha, Beta, Gamma float64 // ms
	MaxBatch, MaxQueue int
	// ArrivalRate in requests per second.
	ArrivalRate float64
	// InputTokens is every request's prompt length; OutputTokens is the
	// mean number of decode iterations, fixed or geometric.
	InputTokens      int
	OutputTokens     int
	GeometricOutputs bool
	// Requests is how many arrivals to simulate after Warmup arrivals.
	Requests, Warmup int
	Seed             uint64
}

// Result is what the simulation measured over the post-warmup arrivals.
type Result struct {
	TTFTms float64
	ITLms  float64
	// Throughput in requests per second, MeanBatch the time-average batch
	// size, Blocking the share of dropped arrivals.
	Throughput float64
	MeanBatch  float64
	Blocking   float64
	Completed  int
}

type request struct {
	arrival   float64
	input     int
	output    int
	generated int
	prefilled bool
	measured  bool
}

// Run simulates until every measured arrival has left.
func Run(c Config) (Result, error) {
	if c.MaxBatch < 1 || c.MaxQueue < 0 || c.ArrivalRate <= 0 || c.InputTokens < 0 || c.OutputTokens < 1 || c.Requests < 1 {
		return Result{}, fmt.Errorf("invalid config %+v", c)
	}
	rng := rand.New(rand.NewPCG(c.Seed, 0x9e3779b97f4a7c15))
	lam := c.ArrivalRate / 1000 // per ms
	outputLen := func() int {
		if !c.GeometricOutputs {
			return c.OutputTokens
		}
		// Geometric on 1, 2, ... with mean OutputTokens.
		p := 1 / float64(c.OutputTokens)
		if p >= 1 {
			return 1
		}
		return 1 + int(math.Floor(math.Log(1-rng.Float64())/math.Log(1-p)))
	}

	var (
		now, nextArrival float64 = 0, rng.ExpFloat64() / lam
		arrivals         int
		queue, batch     []*request
		res              Result
		measuredStart    = -1.0
		measuredEnd      float64
		ttftSum          float64
		ttftN            int
		itlSum, itlN     float64
		batchArea        float64
		dropped, offered int
		pendingMeasured  int
	)
	total := c.Warmup + c.Requests
	admitArrivals := func(until float64) {
		for nextArrival <= until && arrivals < total {
			arrivals++
			measured := arrivals > c.Warmup
			if measured {
				offered++
				if measuredStart < 0 {
					measuredStart = nextArrival
				}
			}
			if len(queue)+len(batch) >= c.MaxBatch+c.MaxQueue {
				if measured {
					dropped++
				}
			} else {
				r := &request{arrival: nextArrival, input: c.InputTokens, output: outputLen(), measured: measured}
				if measured {
					pendingMeasured++
				}
				queue = append(queue, r)
			}
			nextArrival += rng.ExpFloat64() / lam
		}
	}
	for arrivals < total || len(queue) > 0 || len(batch) > 0 {
		if len(queue) == 0 && len(batch) == 0 {
			now = nextArrival
			admitArrivals(now)
			continue
		}
		for len(batch) < c.MaxBatch && len(queue) > 0 {
			batch = append(batch, queue[0])
			queue = queue[1:]
		}
		var tokens, context float64
		for _, r := range batch {
			if !r.prefilled {
				tokens += float64(r.input)
				context += float64(r.input)
			} else {
				tokens++
				context += float64(r.input + r.generated)
			}
		}
		d := c.Alpha + c.Beta*tokens + c.Gamma*context
		end := now + d
		if measuredStart >= 0 && pendingMeasured > 0 {
			batchArea += d * float64(len(batch))
		}
		kept := batch[:0]
		for _, r := range batch {
			if !r.prefilled {
				r.prefilled = true
				if r.measured {
					ttftSum += end - r.arrival
					ttftN++
				}
				kept = append(kept, r)
				continue
			}
			r.generated++
			if r.measured {
				itlSum += d
				itlN++
			}
			if r.generated >= r.output {
				if r.measured {
					res.Completed++
					pendingMeasured--
					measuredEnd = end
				}
				continue
			}
			kept = append(kept, r)
		}
		batch = kept
		now = end
		admitArrivals(now)
	}
	if ttftN == 0 || itlN == 0 {
		return res, fmt.Errorf("nothing measured")
	}
	span := measuredEnd - measuredStart
	res.TTFTms = ttftSum / float64(ttftN)
	res.ITLms = itlSum / itlN
	res.Throughput = float64(res.Completed) / span * 1000
	res.MeanBatch = batchArea / span
	res.Blocking = float64(dropped) / float64(offered)
	return res, nil
}
