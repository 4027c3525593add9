package sim

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/wva-project/wva/pkg/analyzer"
	"github.com/wva-project/wva/pkg/pipeline"
)

func TestZZDebugPlanner(t *testing.T) {
	var traceOverride *Trace
	if os.Getenv("WVA_DEBUG") == "" {
		t.Skip()
	}
	sc := DefaultScenario()
	if os.Getenv("WVA_TRACE") != "" {
		fh, _ := os.Open(os.Getenv("WVA_TRACE"))
		t0, err := ParseTrace(fh, "x")
		if err != nil {
			t.Fatal(err)
		}
		traceOverride = &t0
	}
	if s := os.Getenv("WVA_SHAPE"); s != "" {
		sc.Traffic.Synthetic.Shape = s
	}
	tr, err := sc.LoadTraffic()
	if err != nil {
		t.Fatal(err)
	}
	if traceOverride != nil {
		tr = *traceOverride
	}
	p, err := newWVAPolicy(&sc)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	p.observe = func(now time.Duration, res []pipeline.GroupResult) {
		n++
		if n%2 != 0 || (os.Getenv("WVA_BRIEF") != "") {
			return
		}
		fmt.Printf("t=%v\n", now)
		if s, ok := res[0].Analysis.(analyzer.Summarizer); ok {
			for _, l := range s.Summary() {
				fmt.Println("  ", l)
			}
		}
	}
	pl := PlanOracle(&sc, &tr)
	f := newFleet(&sc, &tr, p, pl.Warm)
	f.run()
	for _, tp := range f.timeline {
		if int(tp.At/time.Minute)%2 == 0 && tp.At%time.Minute == 0 {
			fmt.Println("tl", tp.At, tp.Replicas, tp.Ready, fmt.Sprintf("%.1f", tp.ArrivalRate))
		}
	}
	met := map[int][2]int{}
	for i, r := range f.trace.Requests {
		m := int(r.Arrival / time.Minute)
		c := met[m]
		c[1]++
		if f.met(i) {
			c[0]++
		}
		met[m] = c
	}
	for m := 0; m < 61; m++ {
		if c := met[m]; c[1] > 0 && c[0] < c[1]*95/100 {
			fmt.Printf("minute %d: %d/%d met\n", m, c[0], c[1])
		}
	}
	s := summarize("wva", f)
	fmt.Printf("cost %.1f att %.4f\n", s.Cost, s.SLOAttainment)
}
