package servegen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/wva-project/wva/pkg/sim/trace"
)

// Bounds of what Load reads. ServeGen's largest model directory holds about
// 200 clients, 2016 windows each, and 4 MB dataset files.
const (
	maxClients      = 4096
	maxWindows      = 1 << 16 // per client: 455 days of 600 s windows
	maxPoolWindows  = 1 << 22 // clients x windows
	maxTraceBytes   = 16 << 20
	maxDatasetBytes = 64 << 20
	maxEntries      = 1 << 24 // token-distribution entries in the pool
	maxTimestamp    = 10 * 365 * 24 * 3600
	maxEcho         = 64
)

// Load reads a ServeGen model directory (data/<category>/<model>): per
// client N, chunk-N-trace.csv (lines timestamp,rate,cv,pattern,shape,scale
// per window; an empty pattern: no request in the window) and, optionally,
// chunk-N-dataset.json ({"<timestamp>": {"input_tokens": "{tokens: p, ...}",
// "output_tokens": ...}}; a "{}" distribution: no data from that timestamp,
// as ServeGen skips it). A client without a dataset file counts in the
// aggregate rate but sends nothing. Errors name the file and line.
func Load(dir string) (Pool, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return Pool{}, err
	}
	traces := map[int]string{}
	datasets := map[int]string{}
	for _, e := range entries {
		name := e.Name()
		var into map[int]string
		var rest string
		switch {
		case strings.HasSuffix(name, "-trace.csv"):
			into, rest = traces, strings.TrimSuffix(name, "-trace.csv")
		case strings.HasSuffix(name, "-dataset.json"):
			into, rest = datasets, strings.TrimSuffix(name, "-dataset.json")
		default:
			continue
		}
		id, err := strconv.Atoi(strings.TrimPrefix(rest, "chunk-"))
		if !strings.HasPrefix(rest, "chunk-") || err != nil || id < 0 {
			return Pool{}, fmt.Errorf("%s: want chunk-<client number>-trace.csv or -dataset.json", filepath.Join(dir, name))
		}
		into[id] = filepath.Join(dir, name)
	}
	if len(traces) == 0 {
		return Pool{}, fmt.Errorf("%s: no chunk-<N>-trace.csv files", dir)
	}
	if len(traces) > maxClients {
		return Pool{}, fmt.Errorf("%s: %d clients: at most %d are accepted", dir, len(traces), maxClients)
	}
	for id, path := range datasets {
		if _, ok := traces[id]; !ok {
			return Pool{}, fmt.Errorf("%s: no chunk-%d-trace.csv beside it", path, id)
		}
	}
	ids := make([]int, 0, len(traces))
	for id := range traces {
		ids = append(ids, id)
	}
	sort.Ints(ids)

	pool := Pool{Name: filepath.Base(filepath.Clean(dir))}
	var firstPath string
	entriesLeft := maxEntries
	for _, id := range ids {
		starts, windows, err := loadTrace(traces[id])
		if err != nil {
			return Pool{}, err
		}
		if pool.Starts == nil {
			if len(starts) < 2 {
				return Pool{}, fmt.Errorf("%s: %d windows: at least 2 are needed (the last lasts as long as the one before)", traces[id], len(starts))
			}
			if len(starts)*len(ids) > maxPoolWindows {
				return Pool{}, fmt.Errorf("%s: %d clients x %d windows: at most %d windows are accepted", dir, len(ids), len(starts), maxPoolWindows)
			}
			pool.Starts, firstPath = starts, traces[id]
		} else if err := sameStarts(pool.Starts, starts); err != nil {
			return Pool{}, fmt.Errorf("%s: %w than %s", traces[id], err, filepath.Base(firstPath))
		}
		c := Client{ID: id, Windows: windows}
		if path, ok := datasets[id]; ok {
			if c.Data, err = loadDataset(path, &entriesLeft); err != nil {
				return Pool{}, err
			}
		}
		pool.Clients = append(pool.Clients, c)
	}
	return pool, nil
}

func sameStarts(want, got []time.Duration) error {
	for i := range min(len(want), len(got)) {
		if want[i] != got[i] {
			return fmt.Errorf("line %d: timestamp %d, where the first client has %d: want the same windows", i+1, int64(got[i].Seconds()), int64(want[i].Seconds()))
		}
	}
	if len(want) != len(got) {
		return fmt.Errorf("%d windows: want the same windows (%d)", len(got), len(want))
	}
	return nil
}

// readBounded reads a whole file of at most limit bytes.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: larger than %d MiB: at most %d MiB are accepted", path, limit>>20, limit>>20)
	}
	return b, nil
}

var traceFields = []string{"timestamp", "rate", "cv", "pattern", "shape", "scale"}

func loadTrace(path string) ([]time.Duration, []Window, error) {
	raw, err := readBounded(path, maxTraceBytes)
	if err != nil {
		return nil, nil, err
	}
	var starts []time.Duration
	var windows []Window
	lines := strings.Split(string(raw), "\n")
	for n, line := range lines {
		line = strings.TrimSuffix(line, "\r")
		if line == "" && n == len(lines)-1 {
			break
		}
		fail := func(col int, format string, args ...any) error {
			if col == 0 {
				return fmt.Errorf("%s: line %d: %s", path, n+1, fmt.Sprintf(format, args...))
			}
			return fmt.Errorf("%s: line %d, column %d (%s): %s", path, n+1, col, traceFields[col-1], fmt.Sprintf(format, args...))
		}
		if len(starts) == maxWindows {
			return nil, nil, fail(0, "more than %d windows", maxWindows)
		}
		f := strings.Split(line, ",")
		if len(f) != len(traceFields) {
			return nil, nil, fail(0, "%d fields, want %d: %s", len(f), len(traceFields), strings.Join(traceFields, ","))
		}
		ts, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || ts < 0 || ts > maxTimestamp {
			return nil, nil, fail(1, "%s is not an integer number of seconds in [0, %d]", quote(f[0]), maxTimestamp)
		}
		at := time.Duration(ts) * time.Second
		if len(starts) > 0 && at <= starts[len(starts)-1] {
			return nil, nil, fail(1, "%d does not follow the previous timestamp %d", ts, int64(starts[len(starts)-1].Seconds()))
		}
		var v [6]float64
		for i := 1; i < len(f); i++ {
			if i == 3 {
				continue
			}
			if v[i], err = strconv.ParseFloat(f[i], 64); err != nil || math.IsNaN(v[i]) || math.IsInf(v[i], 0) || v[i] < 0 {
				return nil, nil, fail(i+1, "%s is not a finite number >= 0", quote(f[i]))
			}
		}
		w := Window{Rate: v[1], Shape: v[4], Scale: v[5]}
		switch f[3] {
		case "":
			w = Window{}
		case "Gamma":
			w.Pattern = Gamma
		case "Weibull":
			w.Pattern = Weibull
		default:
			return nil, nil, fail(4, "%s: want Gamma, Weibull or empty (no requests)", quote(f[3]))
		}
		if w.Pattern != None && !(w.Shape > 0) {
			return nil, nil, fail(5, "%s: the shape must be > 0", quote(f[4]))
		}
		if w.Pattern != None && !(w.Scale > 0) {
			return nil, nil, fail(6, "%s: the scale must be > 0", quote(f[5]))
		}
		starts = append(starts, at)
		windows = append(windows, w)
	}
	return starts, windows, nil
}

func loadDataset(path string, entriesLeft *int) ([]Dataset, error) {
	raw, err := readBounded(path, maxDatasetBytes)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	fail := func(format string, args ...any) error {
		off := min(int(dec.InputOffset()), len(raw))
		return fmt.Errorf("%s: line %d: %s", path, 1+bytes.Count(raw[:off], []byte("\n")), fmt.Sprintf(format, args...))
	}
	want := func(d json.Delim) error {
		tok, err := dec.Token()
		if err != nil {
			return fail("%v", err)
		}
		if tok != d {
			return fail("%v where %v is expected", tok, d)
		}
		return nil
	}
	if err := want('{'); err != nil {
		return nil, err
	}
	var out []Dataset
	seen := map[int64]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fail("%v", err)
		}
		key := tok.(string) // object keys are strings
		ts, err := strconv.ParseInt(key, 10, 64)
		if err != nil || ts < 0 || ts > maxTimestamp {
			return nil, fail("key %s is not an integer number of seconds in [0, %d]", quote(key), maxTimestamp)
		}
		if seen[ts] {
			return nil, fail("timestamp %d appears twice", ts)
		}
		seen[ts] = true
		if err := want('{'); err != nil {
			return nil, err
		}
		d := Dataset{At: time.Duration(ts) * time.Second}
		var in, outFound, empty bool
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return nil, fail("%v", err)
			}
			field := tok.(string)
			tok, err = dec.Token()
			if err != nil {
				return nil, fail("%v", err)
			}
			s, ok := tok.(string)
			if !ok {
				return nil, fail("%d: %s is not a string holding a {tokens: probability} dict", ts, quote(field))
			}
			if field != "input_tokens" && field != "output_tokens" {
				// Other fields (reason_ratio, multimodal counts) are not
				// simulated; an empty one still voids the timestamp in ServeGen.
				empty = empty || isEmptyDict(s)
				continue
			}
			dist, err := parseDist(s, entriesLeft)
			if err != nil {
				return nil, fail("%d: %s: %v", ts, field, err)
			}
			if dist.Tokens == nil {
				empty = true
			}
			if field == "input_tokens" {
				d.Input, in = dist, true
			} else {
				d.Output, outFound = dist, true
			}
		}
		if err := want('}'); err != nil {
			return nil, err
		}
		if empty {
			continue
		}
		if !in || !outFound {
			return nil, fail("%d: want both input_tokens and output_tokens", ts)
		}
		out = append(out, d)
	}
	if err := want('}'); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fail("data after the object")
	}
	sort.Slice(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out, nil
}

func isEmptyDict(s string) bool {
	s = strings.TrimSpace(s)
	return strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") && strings.TrimSpace(s[1:len(s)-1]) == ""
}

// parseDist reads a Python dict literal {tokens: probability, ...}; "{}"
// gives a Dist without tokens. The probabilities must sum to 1 within 1e-6,
// as ServeGen validates.
func parseDist(s string, entriesLeft *int) (Dist, error) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "{") || !strings.HasSuffix(s, "}") || len(s) < 2 {
		return Dist{}, fmt.Errorf("%s is not a {tokens: probability} dict", quote(s))
	}
	body := strings.TrimSpace(s[1 : len(s)-1])
	if body == "" {
		return Dist{}, nil
	}
	type entry struct {
		tokens int32
		p      float64
	}
	parts := strings.Split(body, ",")
	if len(parts) > *entriesLeft {
		return Dist{}, fmt.Errorf("more than %d token-distribution entries in the pool", maxEntries)
	}
	*entriesLeft -= len(parts)
	entries := make([]entry, 0, len(parts))
	for _, part := range parts {
		k, v, ok := strings.Cut(part, ":")
		if !ok {
			return Dist{}, fmt.Errorf("entry %s is not tokens: probability", quote(part))
		}
		tokens, err := strconv.ParseInt(strings.TrimSpace(k), 10, 32)
		if err != nil || tokens < 0 || tokens > trace.MaxTokens {
			return Dist{}, fmt.Errorf("tokens %s is not an integer in [0, %d]", quote(k), trace.MaxTokens)
		}
		p, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || !(p >= 0 && p <= 1) {
			return Dist{}, fmt.Errorf("probability %s of %d tokens is not a number in [0, 1]", quote(v), tokens)
		}
		entries = append(entries, entry{int32(tokens), p})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].tokens < entries[j].tokens })
	d := Dist{Tokens: make([]int32, len(entries)), Cum: make([]float64, len(entries))}
	var cum float64
	for i, e := range entries {
		if i > 0 && e.tokens == entries[i-1].tokens {
			return Dist{}, fmt.Errorf("%d tokens appear twice", e.tokens)
		}
		cum += e.p
		d.Tokens[i], d.Cum[i] = e.tokens, cum
	}
	if math.Abs(cum-1) > 1e-6 {
		return Dist{}, fmt.Errorf("the probabilities sum to %v, want 1", cum)
	}
	return d, nil
}

// quote is %q of s, cut to maxEcho bytes.
func quote(s string) string {
	if len(s) <= maxEcho {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(s[:maxEcho]), len(s))
}
