package scalefromzero

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// EPP flow-control queue gauges, newest name first; the older one is still
// exported by llm-d EPPs and is what Gateway API Inference Extension EPPs
// export.
const (
	QueueMetric       = "llm_d_epp_flow_control_queue_size"
	LegacyQueueMetric = "inference_extension_flow_control_queue_size"
)

// Labels carrying the model of a queue sample, in order of preference.
var modelLabels = []string{"target_model_name", "model_name"}

// AnyModel keys queue samples that carry no model label: such an EPP
// serves one InferencePool and, by the 1:1:1 pool:EPP:model convention,
// one model, so its queue counts for every group it serves.
const AnyModel = ""

// Queue is queued requests per model (AnyModel for unlabeled samples).
type Queue map[string]float64

// For returns the queue of a model: its own samples plus unlabeled ones.
func (q Queue) For(modelID string) float64 {
	if modelID == AnyModel {
		return q[AnyModel]
	}
	return q[modelID] + q[AnyModel]
}

// maxMetricsBytes bounds what one scrape reads, and so any one protobuf
// message in it; an EPP's /metrics is tens of kilobytes. A larger answer is
// an error for that EPP.
const maxMetricsBytes = 16 << 20

// cappedReader fails once more than maxMetricsBytes have been read, so an
// oversized answer is an error rather than silently cut short.
type cappedReader struct {
	r io.Reader
	n int64
}

func (c *cappedReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > maxMetricsBytes {
		return n, fmt.Errorf("parse metrics: answer over %d bytes", maxMetricsBytes)
	}
	return n, err
}

// maxQueueSample: a larger queue sample is a broken exporter, dropped like a
// NaN one; it also keeps the per-model sums finite.
const maxQueueSample = 1e9

// ParseQueue reads a /metrics response and sums the flow-control queue per
// model across fairness IDs and priorities. It uses
// llm_d_epp_flow_control_queue_size, or
// inference_extension_flow_control_queue_size when the former has no
// samples. NaN, infinite, negative and over-1e9 samples are ignored. An answer over
// 16 MiB, or a protobuf message declaring more bytes than that or than the
// answer holds, is an error.
func ParseQueue(body io.Reader, contentType string) (Queue, error) {
	h := http.Header{}
	h.Set("Content-Type", contentType)
	opts := &expfmt.DecodeOptions{Timestamp: model.Now()}
	byName := map[string]model.Vector{}
	body = &cappedReader{r: body}
	if format := expfmt.ResponseFormat(h); format.FormatType() == expfmt.TypeProtoDelim {
		br := bufio.NewReader(body)
		for {
			msg, err := readDelimited(br)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, err
			}
			// expfmt decodes and validates the frame; it allocates what
			// the frame declares, which readDelimited has now checked.
			frame := binary.AppendUvarint(make([]byte, 0, len(msg)+binary.MaxVarintLen64), uint64(len(msg)))
			frame = append(frame, msg...)
			dec := &expfmt.SampleDecoder{Dec: expfmt.NewDecoder(bytes.NewReader(frame), format), Opts: opts}
			var v model.Vector
			if err := dec.Decode(&v); err != nil {
				return nil, fmt.Errorf("decode protobuf metrics: %w", err)
			}
			if len(v) > 0 {
				name := string(v[0].Metric[model.MetricNameLabel])
				byName[name] = append(byName[name], v...)
			}
		}
	} else {
		// Keep only our two families before parsing: an EPP exports
		// hundreds of series, and a malformed line elsewhere must not hide
		// the queue.
		filtered, err := filterFamilies(body, QueueMetric, LegacyQueueMetric)
		if err != nil {
			return nil, err
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(bytes.NewReader(filtered))
		if err != nil {
			return nil, fmt.Errorf("parse metrics text: %w", err)
		}
		for name, f := range fams {
			if byName[name], err = expfmt.ExtractSamples(opts, f); err != nil {
				return nil, fmt.Errorf("parse metrics text: %s: %w", name, err)
			}
		}
	}
	samples := byName[QueueMetric]
	if len(samples) == 0 {
		samples = byName[LegacyQueueMetric]
	}
	q := Queue{}
	for _, s := range samples {
		v := float64(s.Value)
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > maxQueueSample {
			continue
		}
		q[modelOf(s.Metric)] += v
	}
	return q, nil
}

// filterFamilies keeps the sample, HELP and TYPE lines of the named
// families.
func filterFamilies(body io.Reader, names ...string) ([]byte, error) {
	var out bytes.Buffer
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		name := line
		if rest, ok := bytes.CutPrefix(line, []byte("# HELP ")); ok {
			name = rest
		} else if rest, ok := bytes.CutPrefix(line, []byte("# TYPE ")); ok {
			name = rest
		}
		for _, n := range names {
			if rest, ok := bytes.CutPrefix(name, []byte(n)); ok && (len(rest) == 0 || rest[0] == '{' || rest[0] == ' ' || rest[0] == '\t') {
				out.Write(line)
				out.WriteByte('\n')
				break
			}
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("parse metrics text: a line is over 1 MiB")
		}
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	return out.Bytes(), nil
}

// readDelimited reads one varint-length-prefixed protobuf message. The
// declared length is checked against maxMetricsBytes before anything is
// allocated, and the buffer grows only with bytes actually received, so a
// short answer declaring gigabytes costs nothing. io.EOF: no more messages.
func readDelimited(br *bufio.Reader) ([]byte, error) {
	size, err := binary.ReadUvarint(br)
	if errors.Is(err, io.EOF) {
		return nil, io.EOF
	}
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = errors.New("truncated message length")
		}
		return nil, fmt.Errorf("decode protobuf metrics: %w", err)
	}
	if size > maxMetricsBytes {
		return nil, fmt.Errorf("decode protobuf metrics: message declares %d bytes, at most %d accepted", size, maxMetricsBytes)
	}
	msg, err := io.ReadAll(io.LimitReader(br, int64(size)))
	if err != nil {
		return nil, fmt.Errorf("decode protobuf metrics: %w", err)
	}
	if uint64(len(msg)) < size {
		return nil, fmt.Errorf("decode protobuf metrics: truncated message: %d of %d declared bytes", len(msg), size)
	}
	return msg, nil
}

func modelOf(m model.Metric) string {
	for _, l := range modelLabels {
		if v := m[model.LabelName(l)]; v != "" {
			return string(v)
		}
	}
	return AnyModel
}

// ScrapeResult is one scrape of one EPP endpoint.
type ScrapeResult struct {
	URL   string
	Queue Queue
	// At is when the response was read: "queue seen" for the latency metric.
	At  time.Time
	Err error
}

// Scraper reads EPP /metrics concurrently: at most one scrape per URL at a
// time, and at most MaxInFlight scrapes overall.
type Scraper struct {
	Client  *http.Client
	Timeout time.Duration
	Now     func() time.Time

	sem      chan struct{}
	mu       sync.Mutex
	inFlight map[string]bool
	observe  func(ScrapeResult, time.Duration)
}

// NewScraper builds a scraper. observe (may be nil) sees every result and
// its duration, for metrics.
func NewScraper(client *http.Client, timeout time.Duration, maxInFlight int, observe func(ScrapeResult, time.Duration)) *Scraper {
	return &Scraper{Client: client, Timeout: timeout, Now: time.Now, sem: make(chan struct{}, max(1, maxInFlight)),
		inFlight: map[string]bool{}, observe: observe}
}

// Launch starts a scrape of url in the background and calls done with the
// result, unless a scrape of url is still running (then it returns false):
// a slow EPP never piles up requests or holds up the others.
func (s *Scraper) Launch(ctx context.Context, url string, done func(ScrapeResult)) bool {
	s.mu.Lock()
	if s.inFlight[url] {
		s.mu.Unlock()
		return false
	}
	s.inFlight[url] = true
	s.mu.Unlock()
	go func() {
		defer func() {
			s.mu.Lock()
			delete(s.inFlight, url)
			s.mu.Unlock()
		}()
		select {
		case s.sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		res := s.Scrape(ctx, url)
		<-s.sem
		done(res)
	}()
	return true
}

// Scrape reads one endpoint now.
func (s *Scraper) Scrape(ctx context.Context, url string) ScrapeResult {
	start := s.Now()
	res := ScrapeResult{URL: url}
	res.Queue, res.Err = s.get(ctx, url)
	res.At = s.Now()
	if s.observe != nil {
		s.observe(res, res.At.Sub(start))
	}
	return res
}

func (s *Scraper) get(ctx context.Context, url string) (Queue, error) {
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("EPP metrics URL %q: %w", url, err)
	}
	// Ask for the text format: it is what we filter cheaply.
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := s.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
		hint := ""
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			hint = " (the EPP wants a bearer token its TokenReview accepts: see --epp-bearer-token-file)"
		}
		return nil, &StatusError{URL: url, Code: resp.StatusCode, Body: strings.TrimSpace(string(msg)), Hint: hint}
	}
	return ParseQueue(resp.Body, resp.Header.Get("Content-Type"))
}

// StatusError is a non-200 answer from an EPP.
type StatusError struct {
	URL  string
	Code int
	Body string
	Hint string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("scrape %s: HTTP %d %q%s", e.URL, e.Code, e.Body, e.Hint)
}

// errorReason is the `reason` label of a failed scrape.
func errorReason(err error) string {
	var se *StatusError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &se) && (se.Code == http.StatusUnauthorized || se.Code == http.StatusForbidden):
		return "unauthorized"
	case errors.As(err, &se):
		return "http_status"
	case errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "Client.Timeout"):
		return "timeout"
	case strings.Contains(err.Error(), "parse metrics") || strings.Contains(err.Error(), "decode protobuf"):
		return "parse"
	}
	return "connection"
}
