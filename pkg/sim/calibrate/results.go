// Package calibrate reads a team's own serving benchmarks (`vllm bench
// serve --save-result`, AIPerf and genai-perf exports) and fits a
// simulated variant's service model to them, so the simulator models the
// team's hardware rather than the embedded fleet.
package calibrate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
)

// Tools whose result files Parse reads.
const (
	ToolVLLM   = "vllm bench serve"
	ToolAIPerf = "aiperf/genai-perf"
)

// MaxResultBytes bounds one results file: a --save-result file with
// per-request arrays of 100,000 requests is a few MiB.
const MaxResultBytes = 64 << 20

// Point is one benchmark run: a load held at a fixed concurrency (or
// request rate) with its mean latencies and throughput.
type Point struct {
	// Source names the file and the run's index in it, for error messages.
	Source string `json:"source"`
	Tool   string `json:"tool"`
	// Concurrency is the number of clients each sending its next request
	// when the previous one finished; 0 when the run was driven by a
	// request rate instead.
	Concurrency int `json:"concurrency,omitempty"`
	// RequestRate is the offered request rate in req/s; 0 for a
	// concurrency-driven run.
	RequestRate float64 `json:"requestRate,omitempty"`
	// InputTokens and OutputTokens are the mean tokens per request.
	InputTokens  float64 `json:"inputTokens"`
	OutputTokens float64 `json:"outputTokens"`
	TTFTMs       float64 `json:"ttftMs"`
	// ITLMs is a request's (last token - first token) / (output - 1),
	// averaged over requests: AIPerf's inter-token latency, vLLM's TPOT.
	ITLMs                 float64 `json:"itlMs"`
	OutputTokensPerSecond float64 `json:"outputTokensPerSecond"`
}

// Parse reads the runs in one results file. A file holds one JSON object
// per run (`vllm bench serve --save-result` writes one, `--append-result`
// appends one per line) or an AIPerf/genai-perf summary export. A run
// missing what a fit needs is an error naming the field.
func Parse(name string, data []byte) ([]Point, error) {
	if len(data) > MaxResultBytes {
		return nil, fmt.Errorf("%s: %d bytes, more than the %d a results file may have", name, len(data), MaxResultBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var points []Point
	for i := 0; ; i++ {
		var run map[string]any
		err := dec.Decode(&run)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: run %d: not a JSON object: %w", name, i+1, err)
		}
		source := fmt.Sprintf("%s#%d", name, i+1)
		p, err := parseRun(run)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		p.Source = source
		points = append(points, p)
	}
	if len(points) == 0 {
		return nil, fmt.Errorf("%s: no benchmark run in the file", name)
	}
	return points, nil
}

func parseRun(run map[string]any) (Point, error) {
	switch {
	case has(run, "mean_ttft_ms"):
		return parseVLLM(run)
	case has(run, "time_to_first_token"), has(run, "records"):
		return parseAIPerf(run)
	}
	return Point{}, errors.New("neither a `vllm bench serve --save-result` run (mean_ttft_ms) nor an AIPerf/genai-perf export (time_to_first_token)")
}

// parseVLLM reads one --save-result object. Its ITL is the mean gap
// between any two tokens; its TPOT is the per-request figure the other
// tools call ITL, so TPOT is what a Point holds.
func parseVLLM(run map[string]any) (Point, error) {
	p := Point{Tool: ToolVLLM}
	completed, err := number(run, "completed")
	if err != nil {
		return p, err
	}
	if completed < 1 {
		return p, fmt.Errorf("completed: %v requests; a run with none cannot be fitted", completed)
	}
	in, err := number(run, "total_input_tokens")
	if err != nil {
		return p, err
	}
	out, err := number(run, "total_output_tokens")
	if err != nil {
		return p, err
	}
	p.InputTokens, p.OutputTokens = in/completed, out/completed
	if p.TTFTMs, err = number(run, "mean_ttft_ms"); err != nil {
		return p, err
	}
	if p.ITLMs, err = number(run, "mean_tpot_ms"); err != nil {
		return p, err
	}
	if p.OutputTokensPerSecond, err = number(run, "output_throughput"); err != nil {
		return p, err
	}
	if c, ok := run["max_concurrency"]; ok && c != nil {
		n, err := number(run, "max_concurrency")
		if err != nil {
			return p, err
		}
		p.Concurrency = int(n)
	}
	if r, ok := run["request_rate"]; ok && r != nil {
		if s, isText := r.(string); !isText || s != "inf" {
			if p.RequestRate, err = number(run, "request_rate"); err != nil {
				return p, err
			}
		}
	}
	return p, p.validate()
}

// AIPerf (and genai-perf before it) export each metric as an object with
// its unit and statistics; AIPerf may nest them under "records", keyed by
// tag. The names below are the ones both tools use.
var aiperfMetrics = map[string][]string{
	"ttft":       {"time_to_first_token", "ttft"},
	"itl":        {"inter_token_latency", "itl"},
	"throughput": {"output_token_throughput"},
	"isl":        {"input_sequence_length", "isl"},
	"osl":        {"output_sequence_length", "osl"},
}

func parseAIPerf(run map[string]any) (Point, error) {
	p := Point{Tool: ToolAIPerf}
	metrics := run
	if recs, ok := run["records"].(map[string]any); ok {
		metrics = recs
	}
	avg := func(key, wantUnit string) (float64, error) {
		for _, name := range aiperfMetrics[key] {
			m, ok := metrics[name].(map[string]any)
			if !ok {
				continue
			}
			v, err := number(m, "avg")
			if err != nil {
				return 0, fmt.Errorf("%s: %w", name, err)
			}
			return inUnit(v, m["unit"], wantUnit, name)
		}
		return 0, fmt.Errorf("%s: missing", aiperfMetrics[key][0])
	}
	var err error
	if p.TTFTMs, err = avg("ttft", "ms"); err != nil {
		return p, err
	}
	if p.ITLMs, err = avg("itl", "ms"); err != nil {
		return p, err
	}
	if p.OutputTokensPerSecond, err = avg("throughput", "tokens/sec"); err != nil {
		return p, err
	}
	if p.InputTokens, err = avg("isl", "tokens"); err != nil {
		return p, err
	}
	if p.OutputTokens, err = avg("osl", "tokens"); err != nil {
		return p, err
	}
	// The load is in the run's configuration: genai-perf writes
	// input_config.concurrency, AIPerf nests it under its load settings.
	if cfg, ok := run["input_config"].(map[string]any); ok {
		if c, ok := findNumber(cfg, "concurrency", 3); ok {
			p.Concurrency = int(c)
		}
		if r, ok := findNumber(cfg, "request_rate", 3); ok {
			p.RequestRate = r
		}
	}
	if p.Concurrency == 0 && p.RequestRate == 0 {
		return p, errors.New("input_config: neither concurrency nor request_rate: the load the run was measured at is unknown")
	}
	return p, p.validate()
}

func (p Point) validate() error {
	switch {
	case p.Concurrency < 0 || p.Concurrency > 1<<20:
		return fmt.Errorf("concurrency %d: out of range", p.Concurrency)
	case p.Concurrency == 0 && p.RequestRate <= 0:
		return errors.New("neither a concurrency nor a finite request rate: the load the run was measured at is unknown")
	case p.InputTokens < 1 || p.OutputTokens < 1:
		return fmt.Errorf("%.1f input and %.1f output tokens per request: both must be at least 1", p.InputTokens, p.OutputTokens)
	case p.TTFTMs <= 0 || p.ITLMs <= 0 || p.OutputTokensPerSecond <= 0:
		return fmt.Errorf("TTFT %.3g ms, ITL %.3g ms, %.3g output tokens/s: all must be positive", p.TTFTMs, p.ITLMs, p.OutputTokensPerSecond)
	}
	return nil
}

func has(m map[string]any, key string) bool { _, ok := m[key]; return ok }

// number reads a finite number at key.
func number(m map[string]any, key string) (float64, error) {
	v, ok := m[key]
	if !ok || v == nil {
		return 0, fmt.Errorf("%s: missing", key)
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("%s: %v is not a number", key, v)
	}
	f, err := n.Float64()
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%s: %v is not a finite number", key, v)
	}
	return f, nil
}

// findNumber looks for key in m and its nested objects, depth levels deep.
func findNumber(m map[string]any, key string, depth int) (float64, bool) {
	if f, err := number(m, key); err == nil {
		return f, true
	}
	if depth == 0 {
		return 0, false
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if sub, ok := m[k].(map[string]any); ok {
			if f, ok := findNumber(sub, key, depth-1); ok {
				return f, true
			}
		}
	}
	return 0, false
}

// inUnit converts v from the unit the export names to want. Latencies may
// be exported in s, ms, us or ns; counts and rates must be in want.
func inUnit(v float64, unit any, want, name string) (float64, error) {
	u, _ := unit.(string)
	u = strings.ToLower(strings.TrimSpace(u))
	if u == "" || u == want {
		return v, nil
	}
	if want == "ms" {
		scale := map[string]float64{"s": 1e3, "sec": 1e3, "seconds": 1e3, "us": 1e-3, "µs": 1e-3, "ns": 1e-6}
		if k, ok := scale[u]; ok {
			return v * k, nil
		}
	}
	if want == "tokens/sec" && (u == "tokens/s" || u == "tok/s") {
		return v, nil
	}
	return 0, fmt.Errorf("%s: unit %q where %s is expected", name, u, want)
}
