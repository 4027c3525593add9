package fleet

import (
	"time"

	"github.com/wva-project/wva/pkg/sim/scenario"
)

// seq is one request in flight.
type seq struct {
	req     int32 // index in the trace
	arrival time.Duration
	input   int32
	output  int32
	// prompt is what must be prefilled: the input, or input + generated
	// after a preemption (recompute).
	prompt     int32
	computed   int32 // tokens whose KV is in the cache
	generated  int32
	blocks     int32
	sched      int32 // tokens scheduled in the step in flight
	firstToken time.Duration
	preempted  int32
	// admitted is set once its queue time is recorded (first admission).
	admitted bool
}

// server is one replica's engine: a waiting queue (FCFS) and the running
// batch, stepped by the fleet's event loop.
type server struct {
	spec       scenario.ServerSpec
	running    []*seq
	waiting    []*seq
	waitHead   int
	freeBlocks int32
	busy       bool
	stepEnd    time.Duration

	// Counters, as vLLM exports them: requests received and finished, the
	// prompt and output tokens of finished requests, and the sums behind the
	// TTFT histogram (per request) and the inter-token latency histogram
	// (per output token after the first).
	arrived     int64
	finished    int64
	finishedIn  int64
	finishedOut int64
	ttftSum     float64
	ttftCount   int64
	itlSum      float64
	itlCount    int64
	// tpot counts finished requests by their time per output token, per
	// bucket of TPOTBounds (vllm:request_time_per_output_token_seconds).
	tpot tpotCounts
	// queue counts requests by their time from arrival to first
	// admission (vllm:request_queue_time_seconds).
	queue queueCounts
	// ttft counts requests by their time to first token
	// (vllm:time_to_first_token_seconds).
	ttft        ttftCounts
	preemptions int64
	steps       int64
}

func newServer(spec scenario.ServerSpec) *server {
	return &server{spec: spec, freeBlocks: spec.NumGPUBlocks}
}

func (s *server) numWaiting() int { return len(s.waiting) - s.waitHead }

func (s *server) idle() bool { return len(s.running) == 0 && s.numWaiting() == 0 }

// kvUsage is vllm:kv_cache_usage_perc: the fraction of blocks in use.
func (s *server) kvUsage() float64 {
	return 1 - float64(s.freeBlocks)/float64(s.spec.NumGPUBlocks)
}

func (s *server) blocksFor(tokens int32) int32 {
	return (tokens + s.spec.BlockSize - 1) / s.spec.BlockSize
}

// fits says whether a request can ever be served: its whole context must
// fit the KV cache (vLLM rejects prompts longer than max_model_len).
func (s *server) fits(input, output int32) bool {
	return int64(input)+int64(output) <= s.spec.KVCapacityTokens()
}

func (s *server) enqueue(q *seq) {
	s.arrived++
	s.waiting = append(s.waiting, q)
}

func (s *server) pushFront(q *seq) {
	if s.waitHead > 0 {
		s.waitHead--
		s.waiting[s.waitHead] = q
		return
	}
	s.waiting = append(s.waiting, nil)
	copy(s.waiting[1:], s.waiting)
	s.waiting[0] = q
}

func (s *server) popFront() *seq {
	q := s.waiting[s.waitHead]
	s.waiting[s.waitHead] = nil
	s.waitHead++
	if s.waitHead == len(s.waiting) {
		s.waiting, s.waitHead = s.waiting[:0], 0
	} else if s.waitHead > 1024 && s.waitHead*2 > len(s.waiting) {
		n := copy(s.waiting, s.waiting[s.waitHead:])
		s.waiting, s.waitHead = s.waiting[:n], 0
	}
	return q
}

// preempt frees a running sequence's KV and puts it back at the head of the
// waiting queue; it will recompute its context (vLLM's recompute mode).
func (s *server) preempt(q *seq) {
	s.freeBlocks += q.blocks
	q.blocks, q.computed, q.sched = 0, 0, 0
	q.prompt = q.input + q.generated
	q.preempted++
	s.preemptions++
	s.pushFront(q)
}

// schedule forms the next batch (vLLM V1 scheduler, FCFS): running
// sequences first, in admission order, each a decode token or its next
// prompt chunk within the token budget; a sequence that needs a KV block
// when none is free preempts the newest running one (possibly itself).
// Then, if nothing was preempted, waiting requests are admitted in order
// while sequences, budget and free blocks allow (a request admitted for
// the first time at now records its queue time). It returns the step's
// duration, or false when there is nothing to do.
func (s *server) schedule(now time.Duration) (time.Duration, bool) {
	budget := s.spec.MaxNumBatchedTokens
	var batched, kv int64
	preempted := false
	for i := 0; i < len(s.running); i++ {
		q := s.running[i]
		q.sched = 0
		if budget <= 0 {
			continue
		}
		n := int32(1)
		if q.computed < q.prompt {
			n = min(q.prompt-q.computed, budget)
		}
		need := s.blocksFor(q.computed+n) - q.blocks
		self := false
		for need > s.freeBlocks {
			victim := s.running[len(s.running)-1]
			s.running = s.running[:len(s.running)-1]
			s.preempt(victim)
			preempted = true
			if victim == q {
				self = true
				break
			}
		}
		if self {
			break
		}
		s.freeBlocks -= need
		q.blocks += need
		q.sched = n
		budget -= n
		batched += int64(n)
		kv += int64(q.computed + n)
	}
	if !preempted {
		for s.numWaiting() > 0 && int32(len(s.running)) < s.spec.MaxNumSeqs && budget > 0 {
			q := s.waiting[s.waitHead]
			n := min(q.prompt-q.computed, budget)
			need := s.blocksFor(q.computed+n) - q.blocks
			if need > s.freeBlocks {
				break
			}
			s.popFront()
			if !q.admitted {
				q.admitted = true
				s.queue.observe((now - q.arrival).Seconds())
			}
			s.freeBlocks -= need
			q.blocks += need
			q.sched = n
			budget -= n
			batched += int64(n)
			kv += int64(q.computed + n)
			s.running = append(s.running, q)
		}
	}
	if batched == 0 {
		return 0, false
	}
	ms := s.spec.StepMs(batched, kv)
	s.steps++
	return max(time.Duration(ms*float64(time.Millisecond)), time.Microsecond), true
}

// complete applies the step that ends at now and appends the sequences that
// finished to done.
func (s *server) complete(now time.Duration, done []*seq) []*seq {
	keep := s.running[:0]
	for _, q := range s.running {
		if q.sched > 0 {
			q.computed += q.sched
			q.sched = 0
			if q.computed >= q.prompt {
				q.generated++
				if q.firstToken < 0 {
					q.firstToken = now
					s.ttftSum += (now - q.arrival).Seconds()
					s.ttftCount++
					s.ttft.observe((now - q.arrival).Seconds())
				}
				if q.generated >= q.output {
					s.freeBlocks += q.blocks
					q.blocks = 0
					s.finished++
					s.finishedIn += int64(q.input)
					s.finishedOut += int64(q.output)
					if q.output > 1 {
						s.itlSum += (now - q.firstToken).Seconds()
						s.itlCount += int64(q.output - 1)
						s.tpot.observe((now - q.firstToken).Seconds() / float64(q.output-1))
					}
					done = append(done, q)
					continue
				}
			}
		}
		keep = append(keep, q)
	}
	clear(s.running[len(keep):])
	s.running = keep
	return done
}

// evict removes every request (the pod is gone) and returns them, reset to
// recompute their context elsewhere.
func (s *server) evict() []*seq {
	var out []*seq
	for _, q := range s.running {
		out = append(out, q)
	}
	for s.numWaiting() > 0 {
		out = append(out, s.popFront())
	}
	for _, q := range out {
		s.freeBlocks += q.blocks
		q.blocks, q.computed, q.sched = 0, 0, 0
		q.prompt = q.input + q.generated
	}
	s.running = s.running[:0]
	return out
}
