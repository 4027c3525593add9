// Package trace reads request traces (Azure LLM inference CSV) and reshapes
// them for the simulator; standard library only, so its fuzz target builds fast.
package trace

import (
	"bufio"
	"compress/gzip"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Request is one request of a trace: when it arrives at the gateway and its
// prompt and output lengths in tokens.
type Request struct {
	Arrival time.Duration
	Input   int32
	Output  int32
}

// Trace is a time-ordered list of requests, arrivals relative to the start.
type Trace struct {
	Name     string
	Requests []Request
}

// Duration is the arrival time of the last request (0 for an empty trace).
func (t Trace) Duration() time.Duration {
	if len(t.Requests) == 0 {
		return 0
	}
	return t.Requests[len(t.Requests)-1].Arrival
}

// Error names the line and column of a malformed trace line.
type Error struct {
	Line   int
	Column int // 1-based; 0 when the whole line is at fault
	Field  string
	Err    error
}

func (e *Error) Error() string {
	if e.Column == 0 {
		return fmt.Sprintf("line %d: %v", e.Line, e.Err)
	}
	return fmt.Sprintf("line %d, column %d (%s): %v", e.Line, e.Column, e.Field, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Azure LLM inference trace columns (AzureLLMInferenceDataset2023).
var traceColumns = []string{"TIMESTAMP", "ContextTokens", "GeneratedTokens"}

// timestampLayouts are accepted for TIMESTAMP; a plain number is seconds
// from an arbitrary origin.
var timestampLayouts = []string{
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999Z07:00",
	"2006-01-02T15:04:05.999999999",
}

// MaxTokens bounds a request's prompt or output: larger values are typos.
const MaxTokens = 10_000_000

// MaxSpan bounds the time from a trace's first to its last request,
// after any time scaling: the simulation and the oracle work per minute over
// the span, so a trace spanning years would exhaust memory.
const MaxSpan = 31 * 24 * time.Hour

// MaxRequests bounds a trace's requests, read or generated, after any
// rate scaling: every simulated policy holds per-request state (about 100
// bytes) for the whole trace, so 10 million rows would exhaust memory.
// The shipped traces have about 20000.
const MaxRequests = 1_000_000

// MaxBytes bounds a trace's bytes, after decompression: a million Azure
// rows take about 40 MB, and a gzip bomb or a gigabyte-long field must stop
// before it is held.
const MaxBytes = 128 << 20

// MaxRateScale bounds Reshape's rate scale.
const MaxRateScale = 1000

// maxTimestamp bounds TIMESTAMP: 2100-01-01T00:00:00Z as a date-time, or
// 4102444800 as a number of seconds. Well inside int64 nanoseconds, so
// arrivals and their differences never overflow.
var maxTimestamp = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)

// maxEcho bounds how much of a bad field an error repeats.
const maxEcho = 64

// quote is %q of s, cut to maxEcho bytes: a megabyte-long field is named,
// not echoed whole.
func quote(s string) string {
	if len(s) <= maxEcho {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(s[:maxEcho]), len(s))
}

// Parse reads a CSV trace in the Azure LLM inference format:
// a header TIMESTAMP,ContextTokens,GeneratedTokens (any case, in this
// order), then one request per line. TIMESTAMP is a date-time
// ("2023-11-16 18:17:03.9799600") or a number of seconds. Lines need not be
// sorted; arrivals are made relative to the earliest. A request with 0
// output tokens is counted as 1 (the server always returns one token).
// Gzip-compressed input (by its magic bytes) is read transparently, within
// the same bounds. Errors name the line and column.
func Parse(r io.Reader, name string) (Trace, error) {
	br := bufio.NewReader(r)
	var in io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return Trace{}, &Error{Line: 1, Err: fmt.Errorf("gzip: %w", err)}
		}
		defer zr.Close()
		in = zr
	}
	cr := csv.NewReader(&boundedReader{r: in, left: MaxBytes + 1})
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	lastLine := 0 // the last line read, for errors of the reader beneath
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return Trace{}, &Error{Line: 1, Err: fmt.Errorf("empty trace: want the header %s", strings.Join(traceColumns, ","))}
	}
	if err != nil {
		return Trace{}, csvError(err, lastLine)
	}
	lastLine, _ = cr.FieldPos(0)
	if len(header) != len(traceColumns) {
		return Trace{}, &Error{Line: 1, Err: fmt.Errorf("header has %d columns, want %d: %s", len(header), len(traceColumns), strings.Join(traceColumns, ","))}
	}
	for i, want := range traceColumns {
		got := strings.TrimSpace(strings.TrimPrefix(header[i], "\ufeff"))
		if !strings.EqualFold(got, want) {
			return Trace{}, &Error{Line: 1, Column: i + 1, Field: "header", Err: fmt.Errorf("column is %s, want %q", quote(got), want)}
		}
	}
	type raw struct {
		at   int64 // nanoseconds
		in   int32
		out  int32
		line int
	}
	var rows []raw
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Trace{}, csvError(err, lastLine)
		}
		line, _ := cr.FieldPos(0)
		lastLine = line
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		if len(rows) == MaxRequests {
			return Trace{}, &Error{Line: line, Err: fmt.Errorf("more than %d requests: at most %d are accepted", MaxRequests, MaxRequests)}
		}
		if len(rec) != len(traceColumns) {
			return Trace{}, &Error{Line: line, Err: fmt.Errorf("has %d columns, want %d (%s)", len(rec), len(traceColumns), strings.Join(traceColumns, ","))}
		}
		at, err := parseTimestamp(strings.TrimSpace(rec[0]))
		if err != nil {
			return Trace{}, &Error{Line: line, Column: 1, Field: traceColumns[0], Err: err}
		}
		var tokens [2]int32
		for i := 1; i <= 2; i++ {
			v, err := strconv.ParseInt(strings.TrimSpace(rec[i]), 10, 64)
			if err != nil || v < 0 || v > MaxTokens {
				return Trace{}, &Error{Line: line, Column: i + 1, Field: traceColumns[i],
					Err: fmt.Errorf("%s is not an integer in [0, %d]", quote(rec[i]), MaxTokens)}
			}
			tokens[i-1] = int32(v)
		}
		rows = append(rows, raw{at: at, in: tokens[0], out: max(tokens[1], 1), line: line})
	}
	if len(rows) == 0 {
		return Trace{}, &Error{Line: 2, Err: errors.New("trace has a header but no requests")}
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].at < rows[j].at })
	t := Trace{Name: name, Requests: make([]Request, len(rows))}
	origin := rows[0].at
	if last := rows[len(rows)-1]; time.Duration(last.at-origin) > MaxSpan {
		return Trace{}, &Error{Line: last.line, Column: 1, Field: traceColumns[0], Err: fmt.Errorf(
			"the trace spans %v from the earliest request (line %d) to this one; at most %v (31 days) is accepted",
			time.Duration(last.at-origin).Round(time.Second), rows[0].line, MaxSpan)}
	}
	for i, r := range rows {
		t.Requests[i] = Request{Arrival: time.Duration(r.at - origin), Input: r.in, Output: r.out}
	}
	return t, nil
}

// csvError names the line of a CSV syntax error, or of a failure of the
// reader beneath (size bound, corrupt gzip): the line after the last read.
func csvError(err error, lastLine int) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) && pe.Err != errTooLarge {
		return &Error{Line: pe.Line, Column: pe.Column, Field: "csv", Err: pe.Err}
	}
	if errors.Is(err, errTooLarge) {
		return &Error{Line: lastLine + 1, Err: errTooLarge}
	}
	return &Error{Line: lastLine + 1, Err: fmt.Errorf("reading: %w", err)}
}

var errTooLarge = fmt.Errorf("the trace is larger than %d MiB (after decompression): at most %d requests are accepted", MaxBytes>>20, MaxRequests)

// boundedReader fails with errTooLarge once it has returned all its bytes
// (MaxBytes + 1: a trace of exactly MaxBytes reads to its end).
type boundedReader struct {
	r    io.Reader
	left int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// parseTimestamp returns nanoseconds since the Unix epoch (or since the
// trace's own origin, for numbers), within [0, maxTimestamp].
func parseTimestamp(s string) (int64, error) {
	if v, err := strconv.ParseFloat(s, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > float64(maxTimestamp.Unix()) {
			return 0, fmt.Errorf("%s is not a number of seconds in [0, %d]", quote(s), maxTimestamp.Unix())
		}
		return int64(secondsToDuration(v)), nil
	}
	for _, layout := range timestampLayouts {
		if ts, err := time.Parse(layout, s); err == nil {
			if ts.Before(time.Unix(0, 0)) || ts.After(maxTimestamp) {
				return 0, fmt.Errorf("%s is outside 1970-01-01 to %s", quote(s), maxTimestamp.Format(time.DateOnly))
			}
			return ts.UnixNano(), nil
		}
	}
	return 0, fmt.Errorf("%s is neither a date-time like 2023-11-16 18:17:03.9799600 nor a number of seconds", quote(s))
}

func secondsToDuration(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }

// Reshape returns the trace with its time axis multiplied by timeScale
// (0.5 plays it twice as fast, keeping the request count) and its request
// rate multiplied by rateScale (2 doubles the requests, keeping the time
// axis: every request is copied floor(rateScale) times, plus once more with
// probability frac(rateScale), copies shifted by up to 1 s; below 1, each
// request is kept with probability rateScale). A positive limit truncates
// the result to that duration. Deterministic for a seed.
func (t Trace) Reshape(timeScale, rateScale float64, limit time.Duration, seed uint64) (Trace, error) {
	if !(timeScale > 0) || math.IsInf(timeScale, 0) {
		return Trace{}, fmt.Errorf("time scale %v: must be a finite number > 0", timeScale)
	}
	if !(rateScale > 0 && rateScale <= MaxRateScale) {
		return Trace{}, fmt.Errorf("rate scale %v: must be in (0, %d]", rateScale, MaxRateScale)
	}
	// The span after scaling (and truncation) is what the simulation walks.
	if span := float64(t.Duration()) * timeScale; span > float64(MaxSpan) && (limit <= 0 || limit > MaxSpan) {
		return Trace{}, fmt.Errorf("time scale %v stretches the trace's %v to %.1f days: at most %v (31 days) is accepted",
			timeScale, t.Duration().Round(time.Second), span/float64(24*time.Hour), MaxSpan)
	}
	// Bounded before allocating: the requests kept by the limit times the
	// rate scale (the copies drawn may add a few; checked again below).
	kept := len(t.Requests)
	if limit > 0 {
		kept = sort.Search(len(t.Requests), func(i int) bool { return float64(t.Requests[i].Arrival)*timeScale > float64(limit) })
	}
	if n := float64(kept) * rateScale; n > MaxRequests {
		return Trace{}, fmt.Errorf("rate scale %v makes %.0f requests of the trace's %d: at most %d are accepted",
			rateScale, n, kept, MaxRequests)
	}
	rng := rand.New(rand.NewPCG(seed, 0x7261746573))
	whole := math.Floor(rateScale)
	frac := rateScale - whole
	out := Trace{Name: t.Name, Requests: make([]Request, 0, int(float64(kept)*rateScale)+1)}
	for _, r := range t.Requests {
		atf := float64(r.Arrival) * timeScale
		if limit > 0 && atf > float64(limit) {
			continue // cut before converting: a huge scale would overflow Duration
		}
		at := time.Duration(atf)
		copies := int(whole)
		if rng.Float64() < frac {
			copies++
		}
		for c := range copies {
			shifted := at
			if c > 0 {
				shifted += time.Duration(rng.Float64() * float64(time.Second))
			}
			if limit > 0 && shifted > limit {
				continue
			}
			if len(out.Requests) == MaxRequests {
				return Trace{}, fmt.Errorf("rate scale %v makes more than %d requests: at most %d are accepted", rateScale, MaxRequests, MaxRequests)
			}
			out.Requests = append(out.Requests, Request{Arrival: shifted, Input: r.Input, Output: r.Output})
		}
	}
	sort.SliceStable(out.Requests, func(i, j int) bool { return out.Requests[i].Arrival < out.Requests[j].Arrival })
	if timeScale != 1 || rateScale != 1 {
		out.Name = fmt.Sprintf("%s (time x%g, rate x%g)", t.Name, timeScale, rateScale)
	}
	return out, nil
}

// Stats summarises a trace.
type Stats struct {
	Requests          int           `json:"requests"`
	Duration          time.Duration `json:"duration"`
	MeanRate          float64       `json:"meanRatePerSec"`
	PeakMinuteRate    float64       `json:"peakMinuteRatePerSec"`
	MeanInputTokens   float64       `json:"meanInputTokens"`
	MeanOutputTokens  float64       `json:"meanOutputTokens"`
	MaxInputTokens    int32         `json:"maxInputTokens"`
	MaxOutputTokens   int32         `json:"maxOutputTokens"`
	MinuteArrivalsMax int           `json:"-"`
}

// Stats computes the trace's summary.
func (t Trace) Stats() Stats {
	s := Stats{Requests: len(t.Requests), Duration: t.Duration()}
	if len(t.Requests) == 0 {
		return s
	}
	perMinute := map[int64]int{}
	var in, out float64
	for _, r := range t.Requests {
		in += float64(r.Input)
		out += float64(r.Output)
		s.MaxInputTokens = max(s.MaxInputTokens, r.Input)
		s.MaxOutputTokens = max(s.MaxOutputTokens, r.Output)
		perMinute[int64(r.Arrival/time.Minute)]++
	}
	n := float64(len(t.Requests))
	s.MeanInputTokens, s.MeanOutputTokens = in/n, out/n
	if d := s.Duration.Seconds(); d > 0 {
		s.MeanRate = n / d
	}
	for _, c := range perMinute {
		s.MinuteArrivalsMax = max(s.MinuteArrivalsMax, c)
	}
	s.PeakMinuteRate = float64(s.MinuteArrivalsMax) / 60
	return s
}
