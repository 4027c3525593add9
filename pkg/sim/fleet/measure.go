package fleet

import (
	"time"

	"github.com/wva-project/wva/pkg/sim/scenario"
	"github.com/wva-project/wva/pkg/sim/trace"
)

// ServerThroughput is the requests per second one replica of the server
// completes under a standing backlog of identical requests (in prompt and
// out output tokens): measured on the server model over 5 simulated
// minutes after 1 of warm-up. 0 when such a request cannot fit.
func ServerThroughput(spec scenario.ServerSpec, in, out int32) float64 {
	s := newServer(spec)
	if !s.fits(in, out) {
		return 0
	}
	const warm, span = time.Minute, 5 * time.Minute
	var now, t0 time.Duration
	var base int64
	marked := false
	var done []*seq
	for now < warm+span {
		for s.numWaiting() < int(spec.MaxNumSeqs) {
			s.enqueue(&seq{arrival: now, input: in, output: out, prompt: in, firstToken: -1})
		}
		if !marked && now >= warm {
			marked, t0, base = true, now, s.finished
		}
		d, ok := s.schedule(now)
		if !ok {
			return 0
		}
		now += d
		done = s.complete(now, done[:0])
	}
	return float64(s.finished-base) / (now - t0).Seconds()
}

// IdleMet counts the requests that meet the SLO each alone on an idle
// replica.
func IdleMet(spec scenario.ServerSpec, reqs []trace.Request, slo scenario.SLO) int {
	met := 0
	for _, r := range reqs {
		srv := newServer(spec)
		in, out := max(r.Input, 1), max(r.Output, 1)
		if !srv.fits(in, out) {
			continue
		}
		q := &seq{input: in, output: out, prompt: in, firstToken: -1}
		srv.enqueue(q)
		var now time.Duration
		var done []*seq
		for len(done) == 0 {
			d, ok := srv.schedule(now)
			if !ok {
				break
			}
			now += d
			done = srv.complete(now, done)
		}
		if len(done) == 0 {
			continue
		}
		itl := time.Duration(0)
		if out > 1 {
			itl = (now - q.firstToken) / time.Duration(out-1)
		}
		if q.firstToken <= slo.TTFT.D() && itl <= slo.ITL.D() {
			met++
		}
	}
	return met
}
