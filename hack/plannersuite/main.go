// Command plannersuite judges a change to wva's planner beside the
// benchmark: it runs one build's `wva simulate` (wva's row only) on the
// benchmark's workloads and on held-out ones of the same kinds
// (hack/benchreport/workloads), and on the one-hour synthetic shapes drawn
// with five further seeds each, and compares two such runs workload by
// workload. A change is worth landing when it helps every set, not only the
// benchmark's draws.
//
//	go build -o /tmp/wva-base ./cmd/wva   # on the base commit
//	go build -o /tmp/wva-new ./cmd/wva    # with the change
//	go run ./hack/plannersuite -bin /tmp/wva-base -out /tmp/suite/base
//	go run ./hack/plannersuite -bin /tmp/wva-new -out /tmp/suite/new
//	go run ./hack/plannersuite -compare /tmp/suite/base,/tmp/suite/new
//
// A run writes one `wva simulate --json` report per workload (about 5
// minutes for the three sets on 2 cores); the comparison prints each workload's
// cost and attainment in both, their ratio and difference (attainment
// capped at 99%, as the benchmark judges it), and per set the geometric
// mean cost ratio and the mean attainment difference. -sim-args adds flags
// to every run, such as `--warmup-mode replay` (the warm-up that ends at the
// trace's minute 10, not where the measured hour starts).
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/wva-project/wva/hack/benchreport/workloads"
	"github.com/wva-project/wva/pkg/sim"
	"github.com/wva-project/wva/pkg/sim/policies"
)

// set is a named list of workloads.
type set struct {
	name string
	list []workloads.Workload
}

var sets = []set{{"benchmark", workloads.Benchmark}, {"held-out", workloads.HeldOut}, {"seeds", seeded()}}

// seeded are the one-hour synthetic shapes drawn with seeds neither the
// benchmark nor the held-out set uses. One draw of a shape says little of
// a change: from seed to seed the ramp's cost under one build varies by a
// fifth, and a change that moves one draw by 5% can move the next the
// other way. The set's summary is the judgment; its rows show the spread.
func seeded() []workloads.Workload {
	shapes := []workloads.Workload{
		{Name: "ramp", Args: []string{"--shape", "ramp"}},
		{Name: "diurnal", Args: []string{"--shape", "diurnal"}},
		{Name: "bursty"},
		{Name: "bursty, 30s start-up", Args: []string{"--startup-delay", "30s"}},
		{Name: "spike", Args: []string{"--shape", "spike"}},
	}
	var out []workloads.Workload
	for _, w := range shapes {
		for seed := firstSeed; seed < firstSeed+seedsPerShape; seed++ {
			out = append(out, workloads.Workload{Name: fmt.Sprintf("%s, seed %d", w.Name, seed),
				Args: append(slices.Clone(w.Args), "--seed", strconv.Itoa(seed))})
		}
	}
	return out
}

// The seeds set draws seedsPerShape seeds of each shape from firstSeed,
// past those the other sets use (1 to 5).
const (
	firstSeed     = 11
	seedsPerShape = 5
)

// attainmentCap is the SLO's attainment: above it buys nothing.
const attainmentCap = 0.99

func main() {
	bin := flag.String("bin", "", "wva binary to run")
	out := flag.String("out", "", "directory for the run's reports (with -bin)")
	compare := flag.String("compare", "", "BASE,NEW: two run directories to compare")
	only := flag.String("only", "", "run only the workloads whose name matches this regular expression")
	simArgs := flag.String("sim-args", "", "flags added to every workload's `wva simulate` (e.g. \"--warmup-mode replay\" to judge a change on the replayed warm-up)")
	flag.Parse()
	var err error
	switch {
	case *compare != "":
		base, next, ok := strings.Cut(*compare, ",")
		if !ok {
			err = errors.New("-compare takes BASE,NEW")
			break
		}
		err = compareRuns(os.Stdout, base, next)
	case *bin != "" && *out != "":
		err = run(*bin, *out, *only, strings.Fields(*simArgs))
	default:
		err = errors.New("give -bin and -out to run, or -compare BASE,NEW")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "plannersuite:", err)
		os.Exit(1)
	}
}

// unsafeInName is what a workload's name loses in its report's file name.
var unsafeInName = regexp.MustCompile(`[^a-z0-9.]+`)

// file is where a run keeps a workload's report.
func file(dir, name string) string {
	return filepath.Join(dir, strings.Trim(unsafeInName.ReplaceAllString(strings.ToLower(name), "-"), "-")+".json")
}

func run(bin, dir, only string, simArgs []string) error {
	match, err := regexp.Compile(only)
	if err != nil {
		return fmt.Errorf("-only: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, s := range sets {
		for _, w := range s.list {
			if !match.MatchString(w.Name) {
				continue
			}
			args := append(append([]string{"simulate", "--progress", "never", "--policies", policies.PolicyWVA, "--json"}, w.Args...), simArgs...)
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(bin, args...)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, stderr.String())
			}
			if err := os.WriteFile(file(dir, w.Name), stdout.Bytes(), 0o644); err != nil {
				return err
			}
			fmt.Printf("%-45s done\n", w.Name)
		}
	}
	return nil
}

// outcome is wva's row of a workload's report.
type outcome struct {
	cost, attainment float64
	events           int
}

func load(dir, name string) (outcome, error) {
	b, err := os.ReadFile(file(dir, name))
	if err != nil {
		return outcome{}, err
	}
	var rep sim.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return outcome{}, fmt.Errorf("%s: %w", file(dir, name), err)
	}
	p, ok := rep.Row(policies.PolicyWVA)
	if !ok {
		return outcome{}, fmt.Errorf("%s: no wva row", file(dir, name))
	}
	return outcome{cost: p.Cost, attainment: p.SLOAttainment, events: p.ScaleEvents}, nil
}

// compareRuns prints each workload both runs hold and each set's summary.
func compareRuns(w io.Writer, base, next string) error {
	for _, s := range sets {
		fmt.Fprintf(w, "%s\n| workload | base cost, SLO met | new cost, SLO met | cost | SLO met (capped 99%%) | scale events |\n| --- | --- | --- | --- | --- | --- |\n", s.name)
		var sum summary
		for _, wl := range s.list {
			b, errB := load(base, wl.Name)
			n, errN := load(next, wl.Name)
			if errB != nil || errN != nil {
				if os.IsNotExist(errB) || os.IsNotExist(errN) {
					continue
				}
				return errors.Join(errB, errN)
			}
			sum.add(b, n)
			fmt.Fprintf(w, "| %s | %.1f, %.2f%% | %.1f, %.2f%% | x%.3f | %+.2f | %d -> %d |\n", wl.Name,
				b.cost, 100*b.attainment, n.cost, 100*n.attainment, n.cost/b.cost, 100*capped(n, b), b.events, n.events)
		}
		fmt.Fprintf(w, "\n%s: %s\n\n", s.name, sum)
	}
	return nil
}

func capped(n, b outcome) float64 {
	return min(n.attainment, attainmentCap) - min(b.attainment, attainmentCap)
}

// summary aggregates a set's comparisons.
type summary struct {
	n                     int
	logCost, attainment   float64
	cheaper, dearer, lost int
}

func (s *summary) add(b, n outcome) {
	s.n++
	ratio := n.cost / b.cost
	s.logCost += math.Log(ratio)
	d := capped(n, b)
	s.attainment += d
	switch {
	case d < -0.001:
		s.lost++
	case ratio < 0.99:
		s.cheaper++
	case ratio > 1.01:
		s.dearer++
	}
}

func (s summary) String() string {
	if s.n == 0 {
		return "no workload in both runs"
	}
	return fmt.Sprintf("%d workloads; cost x%.4f (geometric mean), SLO met %+.3f points on average (capped at 99%%); %d lose attainment, %d cost more at no less, %d cost less at no less",
		s.n, math.Exp(s.logCost/float64(s.n)), 100*s.attainment/float64(s.n), s.lost, s.dearer, s.cheaper)
}
