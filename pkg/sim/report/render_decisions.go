package report

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/wva-project/wva/pkg/sim"
)

// RenderDecisions writes wva's engine cycles (sim.Options.Explain) as
// text, every line led by the cycle's simulated time so that one moment of
// a run can be grepped: the group, its analyzer and the signal's reason,
// the analyzer's account of the cycle (the lines the adapter logs), then
// each variant's target replicas and why.
func RenderDecisions(w io.Writer, rep sim.Report) error {
	bw := bufio.NewWriter(w)
	for _, d := range rep.Decisions {
		at := clock(d.At)
		reason := d.Reason
		if !strings.HasPrefix(reason, d.Analyzer+":") {
			reason = d.Analyzer + ": " + reason
		}
		fmt.Fprintf(bw, "%s %s/%s %s\n", at, d.Namespace, d.ModelID, reason)
		if d.Err != nil {
			fmt.Fprintf(bw, "%s   analyzer failed: %v\n", at, d.Err)
		}
		for _, l := range d.Summary {
			fmt.Fprintf(bw, "%s   %s\n", at, l)
		}
		for _, t := range d.Targets {
			// A target planned as the signal says repeats its reason.
			why := strings.TrimSuffix(strings.TrimSuffix(t.Reason, d.Reason), ": ")
			fmt.Fprintf(bw, "%s   target %s %d (%s, %s: %s)\n", at, t.Variant, t.Replicas, t.Action, t.Rule, why)
		}
	}
	return bw.Flush()
}

// clock is a simulated time as hh:mm:ss from the trace's start, the
// timeline's clock (hours past 24 on multi-day traces, a minus sign during
// the warm-up pre-roll).
func clock(d time.Duration) string {
	sign := ""
	if d < 0 {
		sign, d = "-", -d
	}
	s := int64(d / time.Second)
	return fmt.Sprintf("%s%02d:%02d:%02d", sign, s/3600, s/60%60, s%60)
}
