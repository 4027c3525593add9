// Command benchreport regenerates the benchmark tables in README.md,
// docs/benchmarks.md and docs/simulator.md from `wva simulate` runs, or with
// -check fails when the committed tables differ from a fresh run's (CI runs
// it that way).
//
// Beside the tables it writes a stamp: a digest of everything the tables
// are computed from (the Go toolchain, go.mod and go.sum, every file of
// this module compiled into the simulator, the simulate command and
// benchreport, the traces, configs and published benchmarks the tables
// read) and of the tables themselves. -check skips the simulations when
// the stamp still matches: the simulator is deterministic,
// so the same inputs give the same tables. A changed input or a table
// edited by hand no longer matches, and the tables are simulated again.
//
// Run from the repository root: go run ./hack/benchreport [-check]
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/wva-project/wva/pkg/sim"
	"github.com/wva-project/wva/pkg/sim/calibrate"
	"github.com/wva-project/wva/pkg/sim/fleet"
	"github.com/wva-project/wva/pkg/sim/oracle"
	simpolicies "github.com/wva-project/wva/pkg/sim/policies"
	simreport "github.com/wva-project/wva/pkg/sim/report"

	"github.com/wva-project/wva/hack/benchreport/workloads"
)

// workload is one row group of the policy table: `wva simulate` with args.
type workload = workloads.Workload

const (
	conv           = workloads.Conv
	code           = workloads.Code
	servegenChat   = workloads.ServegenChat
	servegenReason = workloads.ServegenReason
	azureScale     = workloads.AzureScale
	// tokenConfig runs wva on the previous default analyzer for comparison.
	tokenConfig = "examples/slo-planner/token-analyzer.yaml"
	// nimTable is NVIDIA NIM 1.8.0's published table the calibrated H100
	// variant, replicaVariant, is fitted to (docs/simulator.md).
	nimTable       = "examples/benchmarks/nim-1.8.0-llama-3.3-70b-2xh100-fp8-tp2.json"
	replicaVariant = "llama-70b-h100"
)

var (
	azure   = workloads.Azure
	dayArgs = workloads.DayArgs
)

var benchmark = workloads.Benchmark

// tablePolicies are the rows the workload table keeps (static-frontier
// rows are judged against, not listed).
var tablePolicies = map[string]bool{"wva": true, "wva-v1": true, "wva-throughput": true, "queue-threshold": true, "kpa": true, "static-peak": true, "oracle": true}

// stampFile holds the stamp in its block stampBlock; the stamp covers
// every other benchreport block of tableFiles.
const stampFile, stampBlock = "docs/benchmarks.md", "stamp"

var tableFiles = []string{"README.md", "docs/benchmarks.md", "docs/simulator.md"}

// blockBegin matches a block's opening marker and names the block.
var blockBegin = regexp.MustCompile(`<!-- benchreport:([A-Za-z0-9_-]+) -->\n`)

func main() {
	check := flag.Bool("check", false, "fail when the tables ("+strings.Join(tableFiles, ", ")+") differ from a fresh run instead of writing them")
	full := flag.Bool("full", false, "with -check, simulate even when the stamp says the tables are current")
	heldOut := flag.Bool("heldout", false, "print the planner's goals judged on the held-out workloads (workloads.HeldOut) as the goals table judges the benchmark's; writes nothing")
	flag.Parse()
	if *heldOut {
		if err := printHeldOut(); err != nil {
			fmt.Fprintln(os.Stderr, "benchreport:", err)
			os.Exit(1)
		}
		return
	}
	if *check && !*full {
		current, stamp, err := stampIsCurrent()
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchreport:", err)
			os.Exit(1)
		}
		if current {
			fmt.Printf("benchreport: tables generated from these inputs (stamp %s): not simulated again\n", stamp[:12])
			return
		}
		fmt.Println("benchreport: inputs or tables changed since the stamp: simulating")
	}
	if err := run(*check); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

// commands builds wva into dir and returns a runner of its commands and
// one of `wva simulate`.
func commands(dir string) (wva, simulate func(...string) ([]byte, error), err error) {
	bin := filepath.Join(dir, "wva")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/wva").CombinedOutput(); err != nil {
		return nil, nil, fmt.Errorf("go build: %v\n%s", err, out)
	}
	wva = func(args ...string) ([]byte, error) {
		cmd := exec.Command(bin, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("wva %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return out, nil
	}
	simulate = func(args ...string) ([]byte, error) {
		return wva(append([]string{"simulate", "--progress", "never"}, args...)...)
	}
	return wva, simulate, nil
}

// printHeldOut prints the goals table of the held-out workloads: the
// benchmark's goals are worth landing for only where they hold on draws
// the planner was not tuned on.
func printHeldOut() error {
	dir, err := os.MkdirTemp("", "benchreport")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	_, simulate, err := commands(dir)
	if err != nil {
		return err
	}
	table, err := goalsOf(simulate, workloads.HeldOut)
	if err != nil {
		return err
	}
	fmt.Print(table)
	return nil
}

// goalsOf judges the planner's goals on each workload from the run the
// policy table takes of it (judgedRun) and renders the goals table.
func goalsOf(simulate func(...string) ([]byte, error), list []workload) (string, error) {
	var j judged
	for _, w := range list {
		rep, err := judgedRun(simulate, w)
		if err != nil {
			return "", err
		}
		j.add(w, rep)
	}
	return j.table(), nil
}

// judgedRun is the run a workload is judged by: every policy, and for an
// hour-long workload every policy's knob too (--frontier), whose settings
// count among the causal rows; a long workload runs each policy once.
func judgedRun(simulate func(...string) ([]byte, error), w workload) (sim.Report, error) {
	if w.Long {
		return report(simulate, w.Args...)
	}
	return report(simulate, append([]string{"--frontier"}, w.Args...)...)
}

func run(check bool) error {
	dir, err := os.MkdirTemp("", "benchreport")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	wva, simulate, err := commands(dir)
	if err != nil {
		return err
	}

	// The replica tables first: they take seconds, the others minutes.
	replica, err := replicaTable(wva)
	if err != nil {
		return err
	}
	capacity, err := capacityTable(wva)
	if err != nil {
		return err
	}
	table, frontier, goals, err := policyTable(simulate)
	if err != nil {
		return err
	}
	backlog, err := backlogTable(simulate, dir)
	if err != nil {
		return err
	}
	setting, err := settingTable(simulate, dir)
	if err != nil {
		return err
	}
	text, err := simulate()
	if err != nil {
		return err
	}
	full := tableOf(string(text))
	// The README leads with the day, rendered from the policy table's run.
	day, err := report(simulate, dayArgs...)
	if err != nil {
		return err
	}
	var dayText bytes.Buffer
	if err := simreport.RenderText(&dayText, day); err != nil {
		return err
	}
	blocks := map[string]map[string]string{
		"README.md": {"headline": fence(withoutFrontier(tableOf(dayText.String())))},
		"docs/benchmarks.md": {
			"policies": table,
			"goals":    goals,
			"frontier": frontier,
			"backlog":  backlog,
			"setting":  setting,
			"default":  fence(full),
		},
		"docs/simulator.md": {"replica": replica, "capacity": capacity},
	}
	var stale []string
	for file, bs := range blocks {
		old, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		updated := string(old)
		for name, content := range bs {
			if updated, err = replaceBlock(updated, name, content); err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
		}
		if updated == string(old) {
			continue
		}
		if check {
			stale = append(stale, file)
			continue
		}
		if err := os.WriteFile(file, []byte(updated), 0o644); err != nil {
			return err
		}
		fmt.Println("wrote", file)
	}
	if len(stale) > 0 {
		return fmt.Errorf("%s differ from a fresh run: run `go run ./hack/benchreport` and commit the result", strings.Join(stale, " and "))
	}
	if check {
		fmt.Println("benchreport: the tables match a fresh run; the stamp is out of date (`go run ./hack/benchreport` refreshes it, and the next check is quick)")
		return nil
	}
	return writeStamp()
}

// stampIsCurrent says whether the committed stamp is the digest of the
// tree's inputs and tables, and returns the digest.
func stampIsCurrent() (bool, string, error) {
	digest, err := inputsDigest()
	if err != nil {
		return false, "", err
	}
	doc, err := os.ReadFile(stampFile)
	if err != nil {
		return false, "", err
	}
	committed, err := block(string(doc), stampBlock)
	if err != nil {
		return false, "", fmt.Errorf("%s: %w", stampFile, err)
	}
	return committed == stampLine(digest), digest, nil
}

func writeStamp() error {
	digest, err := inputsDigest()
	if err != nil {
		return err
	}
	doc, err := os.ReadFile(stampFile)
	if err != nil {
		return err
	}
	updated, err := replaceBlock(string(doc), stampBlock, stampLine(digest))
	if err != nil {
		return fmt.Errorf("%s: %w", stampFile, err)
	}
	if updated != string(doc) {
		fmt.Println("wrote the stamp in", stampFile)
	}
	return os.WriteFile(stampFile, []byte(updated), 0o644)
}

func stampLine(digest string) string { return "<!-- inputs sha256:" + digest + " -->\n" }

// simulateCommandFiles are the files of wva's command package that the
// tables run: the simulate command and what every command shares. The
// adapter's, controller's and fast path's commands are not simulated.
var simulateCommandFiles = regexp.MustCompile(`^cmd/wva/(main\.go|app/(root|simulate[a-z_]*)\.go)$`)

// stampSources lists what the tables are computed from: this module's
// files compiled into the simulator (pkg/sim and everything it imports:
// the analyzers, the decision pipeline, the collector's types) and into
// benchreport, the simulate command's own files, go.mod and go.sum
// (dependencies are pinned by them), the traces and configs the
// workloads read, and the published table the replica table compares
// with. A change to the adapter, the controller or the fast path leaves
// the stamp current.
func stampSources() ([]string, error) {
	out, err := exec.Command("go", "list", "-deps", "-f",
		`{{if .Module}}{{if .Module.Main}}{{.Dir}}|{{join .GoFiles ","}},{{join .CgoFiles ","}},{{join .EmbedFiles ","}}{{end}}{{end}}`,
		"./pkg/sim/...", "./hack/benchreport", "./cmd/wva").Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	root, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	simulated, err := exec.Command("go", "list", "-deps", "-f", `{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}`,
		"./pkg/sim/...", "./hack/benchreport").Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	inSimulator := map[string]bool{}
	for _, dir := range strings.Fields(string(simulated)) {
		inSimulator[dir] = true
	}
	files := []string{"go.mod", "go.sum", conv, code, servegenChat, servegenReason, tokenConfig, nimTable}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		dir, names, _ := strings.Cut(line, "|")
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			return nil, err
		}
		for _, n := range strings.Split(names, ",") {
			f := filepath.ToSlash(filepath.Join(rel, n))
			if n != "" && (inSimulator[dir] || simulateCommandFiles.MatchString(f)) {
				files = append(files, f)
			}
		}
	}
	return files, nil
}

// inputsDigest hashes what the tables are computed from and the tables as
// they are in the tree.
func inputsDigest() (string, error) {
	files, err := stampSources()
	if err != nil {
		return "", err
	}
	contents := map[string][]byte{}
	for _, f := range files {
		if contents[f], err = os.ReadFile(f); err != nil {
			return "", err
		}
	}
	var tables []string
	// Every block, not a list of them: a table added later is covered.
	for _, file := range tableFiles {
		doc, err := os.ReadFile(file)
		if err != nil {
			return "", err
		}
		for _, m := range blockBegin.FindAllStringSubmatch(string(doc), -1) {
			name := m[1]
			if name == stampBlock {
				continue
			}
			content, err := block(string(doc), name)
			if err != nil {
				return "", fmt.Errorf("%s: %w", file, err)
			}
			tables = append(tables, file+" "+name, content)
		}
	}
	return digestOf(runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH, contents, tables), nil
}

// digestOf is the stamp's digest of a toolchain, files by path and tables
// (pairs of name and content), each length-prefixed so that no two
// different inputs run together into the same bytes.
func digestOf(toolchain string, files map[string][]byte, tables []string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%d %s\n", len(toolchain), toolchain)
	paths := make([]string, 0, len(files))
	for f := range files {
		paths = append(paths, f)
	}
	sort.Strings(paths)
	for _, f := range paths {
		fmt.Fprintf(h, "file %d %s %d\n", len(f), f, len(files[f]))
		h.Write(files[f])
	}
	for _, t := range tables {
		fmt.Fprintf(h, "table %d\n%s", len(t), t)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// policyTable runs every workload (with --frontier) and renders the
// Markdown tables of the policies and of their frontiers.
func policyTable(simulate func(...string) ([]byte, error)) (table, frontier, goals string, err error) {
	var b, f strings.Builder
	var j judged
	f.WriteString("| workload | wva | wva-v1 | wva-throughput | queue-threshold | kpa | constant fleets | wva among the adaptive policies |\n")
	f.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	b.WriteString("| workload | policy | cost | x oracle | SLO met | mean replicas | peak replicas | scale events / h | wva against every other row |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, w := range benchmark {
		rep, err := judgedRun(simulate, w)
		if err != nil {
			return "", "", "", err
		}
		if w.Long {
			policyRows(&b, w.Name, rep)
			j.add(w, rep)
			continue
		}
		token, err := report(simulate, append([]string{"--policies", "wva,oracle", "--wva-config", tokenConfig}, w.Args...)...)
		if err != nil {
			return "", "", "", err
		}
		f.WriteString(frontierRow(w.Name, rep))
		policyRows(&b, w.Name, rep)
		j.add(w, rep)
		if wva, ok := token.Row(simpolicies.PolicyWVA); ok {
			b.WriteString(row(w.Name, "wva (token analyzer)", wva, token.Stats.Duration, ""))
		}
	}
	return b.String(), f.String(), j.table(), nil
}

// policyRows writes the table's rows of a workload's report, the verdict
// beside wva's.
func policyRows(b *strings.Builder, name string, rep sim.Report) {
	for _, p := range rep.Policies {
		if !tablePolicies[p.Policy] {
			continue
		}
		verdict := ""
		if p.Policy == simpolicies.PolicyWVA && rep.Verdict != nil {
			verdict = rep.Verdict.String()
		}
		b.WriteString(row(name, p.Policy, p, rep.Stats.Duration, verdict))
	}
}

// frontierRow is one workload's costs to reach 95% / 99% attainment.
func frontierRow(workload string, rep sim.Report) string {
	cell := func(policy string) string {
		p, ok := rep.Row(policy)
		if !ok || p.Frontier == nil {
			return "n/a"
		}
		return cost(p.Frontier.CostAt95) + " / " + cost(p.Frontier.CostAt99)
	}
	return fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s | %s |\n", workload, cell(simpolicies.PolicyWVA), cell(simpolicies.PolicyWVAV1),
		cell(simpolicies.PolicyWVAThroughput), cell(simpolicies.PolicyQueueThreshold), cell(simpolicies.PolicyKPA), cell(simpolicies.PolicyStaticPeak), simreport.FrontierRanking(rep))
}

func cost(c *float64) string {
	if c == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f", *c)
}

// backlogDrainSeconds are the token analyzer's settings the backlog table
// compares (240 s is the L40S start-up).
var backlogDrainSeconds = []int{0, 15, 30, 60, 240}

// backlogColumns are the workloads the backlog table compares: each
// heading and the workload's name in workloads.
var backlogColumns = []struct{ heading, workload string }{
	{"spike", "spike"}, {"conv x3", "Azure conv x3"}, {"code x3", "Azure code x3"}, {"bursty (default)", "default (bursty)"},
}

func workloadNamed(name string) (workload, bool) {
	for _, w := range benchmark {
		if w.Name == name {
			return w, true
		}
	}
	return workload{}, false
}

// backlogTable runs the token analyzer (tokenConfig) with each
// backlogDrainSeconds on the spike, conv, code and the default, against
// the oracle, and renders cost (x oracle), attainment.
func backlogTable(simulate func(...string) ([]byte, error), dir string) (string, error) {
	base, err := os.ReadFile(tokenConfig)
	if err != nil {
		return "", err
	}
	var cols []workload
	for _, c := range backlogColumns {
		w, ok := workloadNamed(c.workload)
		if !ok {
			return "", fmt.Errorf("backlog table: no workload named %q", c.workload)
		}
		cols = append(cols, workload{Name: c.heading, Args: w.Args})
	}
	var b strings.Builder
	b.WriteString(header("`backlogDrainSeconds`", cols))
	for _, h := range backlogDrainSeconds {
		// The entry is a YAML block scalar: the key goes in at its indent.
		cfg := filepath.Join(dir, fmt.Sprintf("backlog-%d.yaml", h))
		if err := os.WriteFile(cfg, []byte(strings.TrimRight(string(base), "\n")+fmt.Sprintf("\n    backlogDrainSeconds: %d\n", h)), 0o644); err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "| %d |", h)
		for _, c := range cols {
			rep, err := report(simulate, append([]string{"--policies", "wva,oracle", "--wva-config", cfg}, c.Args...)...)
			if err != nil {
				return "", err
			}
			for _, p := range rep.Policies {
				if p.Policy == simpolicies.PolicyWVA {
					fmt.Fprintf(&b, " %.1f (%.2fx), %.2f%% |", p.Cost, p.CostToOracle, 100*p.SLOAttainment)
				}
			}
		}
		b.WriteString("\n")
	}
	return b.String(), nil
}

// settingAttainments are the sloAttainment settings the setting table
// runs besides the shipped one: the margin is the only thing they move.
var settingAttainments = []float64{0.9, 0.95, 0.97}

// settingColumns are the workloads the setting table compares: the
// bursty default and the smooth ones (conv at three rates, and two
// synthetic shapes the planner was not developed on).
var settingColumns = []workload{
	{Name: "default (bursty)"},
	{Name: "Azure conv x3", Args: azure(conv, azureScale)},
	{Name: "Azure conv x3.6", Args: azure(conv, 1.2*azureScale)},
	{Name: "Azure conv x4.5", Args: azure(conv, 1.5*azureScale)},
	{Name: "diurnal", Args: []string{"--shape", "diurnal"}},
	{Name: "ramp", Args: []string{"--shape", "ramp"}},
}

// settingTable runs wva at each settingAttainments and at the shipped
// configuration on every settingColumns workload, and renders cost and
// attainment, with the cheapest constant fleet meeting the SLO below: one
// configuration serves every workload, so a setting is only as good as
// its worst column.
func settingTable(simulate func(...string) ([]byte, error), dir string) (string, error) {
	var b strings.Builder
	b.WriteString(header("`sloAttainment`", settingColumns))
	cheapest := make([]*float64, len(settingColumns))
	settings := append(append([]float64(nil), settingAttainments...), 0)
	for _, a := range settings {
		var extra []string
		label := "shipped (`deploy/default`)"
		policies := simpolicies.PolicyWVA + "," + simpolicies.PolicyStaticFrontier
		if a > 0 {
			cfg := filepath.Join(dir, fmt.Sprintf("attainment-%g.yaml", a))
			entry := fmt.Sprintf("wva-saturation-scaling-config:\n  default: |\n    sloAttainment: %g\n", a)
			if err := os.WriteFile(cfg, []byte(entry), 0o644); err != nil {
				return "", err
			}
			extra, label, policies = []string{"--wva-config", cfg}, fmt.Sprintf("%g", a), simpolicies.PolicyWVA
		}
		fmt.Fprintf(&b, "| %s |", label)
		for i, c := range settingColumns {
			rep, err := report(simulate, append(append([]string{"--policies", policies}, extra...), c.Args...)...)
			if err != nil {
				return "", err
			}
			for _, p := range rep.Policies {
				switch {
				case p.Policy == simpolicies.PolicyWVA:
					fmt.Fprintf(&b, " %.1f, %.2f%% |", p.Cost, 100*p.SLOAttainment)
				case oracle.IsFrontierRow(p.Policy) && p.SLOAttainment >= rep.SLO.Attainment && (cheapest[i] == nil || p.Cost < *cheapest[i]):
					cheapest[i] = &p.Cost
				}
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("| cheapest constant fleet meeting the SLO |")
	for _, c := range cheapest {
		b.WriteString(" " + cost(c) + " |")
	}
	b.WriteString("\n")
	return b.String(), nil
}

// replicaShape is a benchmark's request: input and output tokens.
type replicaShape struct{ in, out int32 }

// replicaShapes groups a published table's points by request, in the
// order they first appear, with each shape's concurrencies in file order.
// `simulate replica` runs fixed concurrency and whole tokens, so a
// rate-driven point or a fractional mean is an error.
func replicaShapes(points []calibrate.Point) ([]replicaShape, map[replicaShape][]int, error) {
	var order []replicaShape
	concurrencies := map[replicaShape][]int{}
	for _, p := range points {
		if p.Concurrency < 1 {
			return nil, nil, fmt.Errorf("%s: not a fixed-concurrency run", p.Source)
		}
		if p.InputTokens != math.Trunc(p.InputTokens) || p.OutputTokens != math.Trunc(p.OutputTokens) ||
			p.InputTokens < 1 || p.OutputTokens < 1 || p.InputTokens > fleet.MaxBenchTokens || p.OutputTokens > fleet.MaxBenchTokens {
			return nil, nil, fmt.Errorf("%s: %g input / %g output tokens: `simulate replica` runs whole tokens in [1, %d]", p.Source, p.InputTokens, p.OutputTokens, fleet.MaxBenchTokens)
		}
		s := replicaShape{int32(p.InputTokens), int32(p.OutputTokens)}
		if _, seen := concurrencies[s]; !seen {
			order = append(order, s)
		}
		concurrencies[s] = append(concurrencies[s], p.Concurrency)
	}
	return order, concurrencies, nil
}

// replicaTable runs `wva simulate replica` on replicaVariant for each
// request shape of the published nimTable and renders the comparison.
func replicaTable(wva func(...string) ([]byte, error)) (string, error) {
	data, err := os.ReadFile(nimTable)
	if err != nil {
		return "", err
	}
	published, err := calibrate.Parse(nimTable, data)
	if err != nil {
		return "", err
	}
	shapes, concurrencies, err := replicaShapes(published)
	if err != nil {
		return "", err
	}
	simulated := map[replicaShape][]fleet.ReplicaPoint{}
	for _, s := range shapes {
		list := make([]string, len(concurrencies[s]))
		for i, c := range concurrencies[s] {
			list[i] = strconv.Itoa(c)
		}
		args := []string{"simulate", "replica", "--variant", replicaVariant, "--input-tokens", strconv.Itoa(int(s.in)),
			"--output-tokens", strconv.Itoa(int(s.out)), "--concurrency", strings.Join(list, ","), "--json"}
		var rep fleet.ReplicaReport
		if err := wvaJSON(wva, &rep, args...); err != nil {
			return "", err
		}
		if len(rep.Variants) != 1 {
			return "", fmt.Errorf("wva %s: %d variants in the answer, want 1", strings.Join(args, " "), len(rep.Variants))
		}
		simulated[s] = rep.Variants[0].Points
	}
	return renderReplicaTable(published, simulated)
}

// renderReplicaTable is the Markdown table of each published point beside
// the simulated point of the same request shape and concurrency, in the
// published order, with the largest relative error of the three figures.
func renderReplicaTable(published []calibrate.Point, simulated map[replicaShape][]fleet.ReplicaPoint) (string, error) {
	var b strings.Builder
	b.WriteString("| in / out tokens | concurrency | simulated (TTFT ms / ITL ms / output tok/s) | NIM 1.8.0 (same) | worst error |\n")
	b.WriteString("| --- | --- | --- | --- | --- |\n")
	for _, p := range published {
		s := replicaShape{int32(p.InputTokens), int32(p.OutputTokens)}
		var got *fleet.ReplicaPoint
		for i := range simulated[s] {
			if simulated[s][i].Concurrency == p.Concurrency {
				got = &simulated[s][i]
				break
			}
		}
		if got == nil {
			return "", fmt.Errorf("%s: no simulated point at %d input / %d output tokens, concurrency %d", p.Source, s.in, s.out, p.Concurrency)
		}
		for _, published := range []float64{p.TTFTMs, p.ITLMs, p.OutputTokensPerSecond} {
			if published <= 0 {
				return "", fmt.Errorf("%s: a published figure is %g; the error against it is undefined", p.Source, published)
			}
		}
		worst := calibrate.Compare(p, calibrate.Predicted{TTFTMs: got.TTFTMs, ITLMs: got.ITLMs, OutputTokensPerSecond: got.OutputTokensPerSecond}).Worst()
		// The published figures as published; the simulated ones rounded.
		fmt.Fprintf(&b, "| %d / %d | %d | %.1f / %.2f / %.1f | %s / %s / %s | %.1f%% |\n", s.in, s.out, p.Concurrency,
			got.TTFTMs, got.ITLMs, got.OutputTokensPerSecond, asPublished(p.TTFTMs), asPublished(p.ITLMs), asPublished(p.OutputTokensPerSecond), 100*worst)
	}
	return b.String(), nil
}

func asPublished(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// header is a Markdown table's heading: first, then one column per
// workload.
func header(first string, cols []workload) string {
	var b strings.Builder
	b.WriteString("| " + first + " |")
	for _, c := range cols {
		b.WriteString(" " + c.Name + " |")
	}
	b.WriteString("\n| --- |" + strings.Repeat(" --- |", len(cols)) + "\n")
	return b.String()
}

// reports holds the reports run so far by their arguments: a day costs
// minutes, and the README's headline reuses the policy table's.
var reports = map[string]sim.Report{}

// wvaJSON runs wva with args and decodes its JSON answer into v.
func wvaJSON(wva func(...string) ([]byte, error), v any, args ...string) error {
	out, err := wva(args...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("wva %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

func report(simulate func(...string) ([]byte, error), args ...string) (sim.Report, error) {
	key := strings.Join(args, "\x00")
	if rep, ok := reports[key]; ok {
		return rep, nil
	}
	out, err := simulate(append([]string{"--json"}, args...)...)
	if err != nil {
		return sim.Report{}, err
	}
	var rep sim.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		return sim.Report{}, fmt.Errorf("wva simulate %s --json: %w", strings.Join(args, " "), err)
	}
	reports[key] = rep
	return rep, nil
}

// row is one policy's row; its scale events are per hour of the trace
// (a figure of thrash: the goal is at most 12 on average).
func row(workload, policy string, p sim.PolicySummary, trace time.Duration, verdict string) string {
	return fmt.Sprintf("| %s | %s | %.1f | %.2f | %.2f%% | %.1f | %d | %.1f | %s |\n", workload, policy, p.Cost, p.CostToOracle,
		100*p.SLOAttainment, p.MeanReplicas, p.MaxReplicas, perHour(p.ScaleEvents, trace), verdict)
}

// tableOf keeps the table and its notes from `wva simulate`'s text output:
// from the header line to the first blank line after it.
func tableOf(out string) string {
	lines := strings.Split(out, "\n")
	var keep []string
	for _, l := range lines {
		if len(keep) == 0 && !strings.HasPrefix(l, "POLICY") {
			continue
		}
		if l == "" {
			break
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n") + "\n"
}

// withoutFrontier drops the static-frontier rows (the README keeps the
// named policies; docs/benchmarks.md has every row).
func withoutFrontier(table string) string {
	var keep []string
	for _, l := range strings.SplitAfter(table, "\n") {
		if !oracle.IsFrontierRow(l) { // a row starts with its policy name
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "")
}

func fence(s string) string { return "```\n" + s + "```\n" }

// replaceBlock replaces what stands between the markers
// <!-- benchreport:NAME --> and <!-- /benchreport:NAME -->.
// block returns the content of a block.
func block(doc, name string) (string, error) {
	begin, end := "<!-- benchreport:"+name+" -->\n", "<!-- /benchreport:"+name+" -->"
	i := strings.Index(doc, begin)
	j := strings.Index(doc, end)
	if i < 0 || j < i+len(begin) {
		return "", errors.New("markers for block " + name + " not found: " + strings.TrimSpace(begin) + " ... " + end)
	}
	return doc[i+len(begin) : j], nil
}

func replaceBlock(doc, name, content string) (string, error) {
	begin, end := "<!-- benchreport:"+name+" -->\n", "<!-- /benchreport:"+name+" -->"
	i := strings.Index(doc, begin)
	j := strings.Index(doc, end)
	if i < 0 || j < i {
		return "", errors.New("markers for block " + name + " not found: " + strings.TrimSpace(begin) + " ... " + end)
	}
	return doc[:i+len(begin)] + content + doc[j:], nil
}
