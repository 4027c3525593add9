// Package eppqueue parses an EPP's /metrics answer into its flow-control
// queue per model. It depends on prometheus/common and protowire only, so
// its fuzz target builds without client-go.
//
// The answer comes from a pod anyone who can label pods may run, so the
// parser streams it and bounds what it costs: time and memory grow
// linearly with the answer, never with what a line declares. It does not
// use expfmt's text parser, whose cost is quadratic in the labels of a
// sample, nor its protobuf decoder, which builds every series in memory.
package eppqueue

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
	"strconv"
	"unicode/utf8"

	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/encoding/protowire"
)

// EPP metric names, newest name first; the older one is still exported by
// llm-d EPPs and is what Gateway API Inference Extension EPPs export. The
// collector's Prometheus queries use the same constants.
const (
	// Flow-control queue gauges: queued requests, and their bytes.
	Metric            = "llm_d_epp_flow_control_queue_size"
	LegacyMetric      = "inference_extension_flow_control_queue_size"
	BytesMetric       = "llm_d_epp_flow_control_queue_bytes"
	LegacyBytesMetric = "inference_extension_flow_control_queue_bytes"
	// The per-model request counter (gateway arrivals, counted before flow
	// control holds anything); the legacy name is the one before
	// gateway-api-inference-extension v1.0.
	RequestsMetric       = "inference_objective_request_total"
	LegacyRequestsMetric = "inference_model_request_total"
)

// families are the queue families in order of preference.
var families = [2][]byte{[]byte(Metric), []byte(LegacyMetric)}

// Labels carrying the model of an EPP sample, in order of preference:
// TargetModelLabel is the model after rewrites (what the serving pods see),
// ModelLabel the requested one.
const (
	TargetModelLabel = "target_model_name"
	ModelLabel       = "model_name"
)

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

// Bounds of one answer. A real EPP's /metrics is tens of kilobytes, its
// queue samples carry about five labels, and it serves one model plus its
// LoRA adapters. With them one Parse holds at most about 3 MiB (a line
// buffer, a protobuf message, the per-model sums), whatever the answer.
const (
	// MaxBytes bounds what Parse reads (after any HTTP decompression); a
	// larger answer is an error.
	MaxBytes = 16 << 20
	// MaxLineBytes bounds a text line and a queue family's protobuf
	// message; a longer one is an error. Larger protobuf messages of other
	// families are skipped unread.
	MaxLineBytes = 1 << 20
	// MaxLabels bounds the labels of a queue sample; one with more is
	// skipped (SkipTooManyLabels).
	MaxLabels = 32
	// MaxModels bounds the distinct models of a queue family; an answer
	// with more is an error rather than a queue silently missing models.
	MaxModels = 2048
	// MaxModelBytes bounds a model name; a sample with a longer one is
	// skipped (SkipModelTooLong).
	MaxModelBytes = 512
)

// Reasons a queue sample is skipped; the rest of the answer still counts.
const (
	SkipMalformed      = "malformed"
	SkipDuplicateLabel = "duplicate_label"
	SkipTooManyLabels  = "too_many_labels"
	SkipModelTooLong   = "model_too_long"
	// SkipValue: NaN, infinite, negative or over 1e9.
	SkipValue = "value"
)

// Skipped counts skipped queue samples by reason.
type Skipped map[string]int

// cappedReader fails once more than MaxBytes have been read, so an
// oversized answer is an error rather than silently cut short.
type cappedReader struct {
	r io.Reader
	n int64
}

func (c *cappedReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > MaxBytes {
		return n, errOverCap
	}
	return n, err
}

var errOverCap = fmt.Errorf("parse metrics: answer over %d bytes", MaxBytes)

// maxQueueSample: a larger queue sample is a broken exporter, dropped like a
// NaN one; it also keeps the per-model sums finite.
const maxQueueSample = 1e9

// ctxCheckLines: how many text lines are read between checks of ctx.
const ctxCheckLines = 256

// Parse reads a /metrics response and sums the flow-control queue per
// model across fairness IDs and priorities. It uses
// llm_d_epp_flow_control_queue_size, or
// inference_extension_flow_control_queue_size when the former has no
// samples. Bad queue samples are skipped and counted in Skipped. An answer
// over MaxBytes, a line or queue message over MaxLineBytes, a queue family
// over MaxModels, a malformed protobuf framing, or ctx ending is an error.
func Parse(ctx context.Context, body io.Reader, contentType string) (Queue, Skipped, error) {
	h := http.Header{}
	h.Set("Content-Type", contentType)
	a := newAccumulator()
	body = &cappedReader{r: body}
	var err error
	if expfmt.ResponseFormat(h).FormatType() == expfmt.TypeProtoDelim {
		err = parseProto(ctx, body, a)
	} else {
		err = parseText(ctx, body, a)
	}
	if err != nil {
		// A read cut short by the deadline reports it, whatever the
		// transport's wording.
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = fmt.Errorf("read metrics: %w: %v", cerr, err)
		}
		return nil, a.skipped, err
	}
	return a.queue(), a.skipped, nil
}

// accumulator sums the samples of both families. Sums are kept by index
// so that adding to a known model allocates nothing.
type accumulator struct {
	index   [2]map[string]int
	sums    [2][]float64
	seen    [2]bool
	skipped Skipped
}

func newAccumulator() *accumulator {
	return &accumulator{index: [2]map[string]int{{}, {}}, skipped: Skipped{}}
}

// add counts one sample of families[fam]. Its error ends the parse.
func (a *accumulator) add(fam int, model []byte, v float64, reason string) error {
	if reason == "" && len(model) > MaxModelBytes {
		reason = SkipModelTooLong
	}
	if reason != "" {
		a.skipped[reason]++
		return nil
	}
	a.seen[fam] = true
	if fam == 0 {
		a.index[1], a.sums[1] = nil, nil // the legacy family is no longer used
	} else if a.seen[0] {
		return nil
	}
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > maxQueueSample {
		a.skipped[SkipValue]++
		return nil
	}
	if i, ok := a.index[fam][string(model)]; ok {
		a.sums[fam][i] += v
		return nil
	}
	if len(a.sums[fam]) >= MaxModels {
		return fmt.Errorf("parse metrics: %s has over %d models", families[fam], MaxModels)
	}
	a.index[fam][string(model)] = len(a.sums[fam])
	a.sums[fam] = append(a.sums[fam], v)
	return nil
}

// queue is the preferred family's queue.
func (a *accumulator) queue() Queue {
	fam := 1
	if a.seen[0] {
		fam = 0
	}
	q := make(Queue, len(a.sums[fam]))
	for model, i := range a.index[fam] {
		q[model] = a.sums[fam][i]
	}
	return q
}

func parseText(ctx context.Context, body io.Reader, a *accumulator) error {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLineBytes)
	for n := 0; sc.Scan(); n++ {
		if n%ctxCheckLines == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("parse metrics: %w", err)
			}
		}
		fam, rest := family(sc.Bytes())
		if fam < 0 {
			continue
		}
		model, v, reason := parseTextSample(rest)
		if err := a.add(fam, model, v, reason); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("parse metrics text: a line is over %d MiB", MaxLineBytes>>20)
		}
		if errors.Is(err, errOverCap) {
			return err
		}
		return fmt.Errorf("read metrics: %w", err)
	}
	return nil
}

// family returns which queue family a text line is a sample of (-1: none,
// comments included) and the line after the name. Other lines are never
// parsed, so a malformed one cannot hide the queue.
func family(line []byte) (int, []byte) {
	line = skipBlank(line)
	for i, name := range families {
		if rest, ok := bytes.CutPrefix(line, name); ok && (len(rest) == 0 || rest[0] == '{' || rest[0] == ' ' || rest[0] == '\t') {
			return i, rest
		}
	}
	return -1, nil
}

// labelSet is a sample's label names so far, in either format (at most
// MaxLabels, each once), and the values of those that name its model.
type labelSet struct {
	names        [MaxLabels][]byte
	n            int
	target, name []byte
}

// value remembers a label's value when the label names the model.
func (l *labelSet) value(label, val []byte) {
	switch string(label) {
	case TargetModelLabel:
		l.target = val
	case ModelLabel:
		l.name = val
	}
}

// model is the sample's model: target_model_name, else model_name.
func (l *labelSet) model() []byte {
	if len(l.target) > 0 {
		return l.target
	}
	return l.name
}

// add records a label's name, or says why its sample is skipped.
func (l *labelSet) add(name []byte) (reason string) {
	if l.n == MaxLabels {
		return SkipTooManyLabels
	}
	for _, prev := range l.names[:l.n] {
		if bytes.Equal(prev, name) {
			return SkipDuplicateLabel
		}
	}
	l.names[l.n] = name
	l.n++
	return ""
}

// parseTextSample parses `{labels} value [timestamp]` of a text sample
// and returns its model and value, or the reason to skip it. It stops at
// the first error, so its cost is linear in the line.
func parseTextSample(s []byte) (model []byte, v float64, reason string) {
	var labels labelSet
	if len(s) > 0 && s[0] == '{' {
		s = s[1:]
		for {
			s = skipBlank(s)
			if len(s) > 0 && s[0] == '}' {
				s = s[1:]
				break
			}
			var label, val []byte
			var ok bool
			if len(s) > 0 && s[0] == '"' {
				label, s, ok = quoted(s)
			} else {
				label, s, ok = labelName(s)
			}
			if !ok {
				return nil, 0, SkipMalformed
			}
			if why := labels.add(label); why != "" {
				return nil, 0, why
			}
			s = skipBlank(s)
			if len(s) == 0 || s[0] != '=' {
				return nil, 0, SkipMalformed
			}
			if val, s, ok = quoted(skipBlank(s[1:])); !ok {
				return nil, 0, SkipMalformed
			}
			labels.value(label, val)
			s = skipBlank(s)
			if len(s) > 0 && s[0] == ',' {
				s = s[1:]
				continue
			}
			if len(s) > 0 && s[0] == '}' {
				s = s[1:]
				break
			}
			return nil, 0, SkipMalformed
		}
	}
	tok, s := token(skipBlank(s))
	v, err := strconv.ParseFloat(string(tok), 64)
	if err != nil {
		return nil, 0, SkipMalformed
	}
	if ts, rest := token(skipBlank(s)); len(ts) > 0 {
		if _, err := strconv.ParseInt(string(ts), 10, 64); err != nil || len(skipBlank(rest)) > 0 {
			return nil, 0, SkipMalformed
		}
	}
	return unescape(labels.model()), v, ""
}

func skipBlank(s []byte) []byte {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	return s
}

// token splits s at its first blank.
func token(s []byte) (tok, rest []byte) {
	i := bytes.IndexAny(s, " \t")
	if i < 0 {
		return s, nil
	}
	return s[:i], s[i:]
}

// labelName reads a legacy label name, [a-zA-Z_][a-zA-Z0-9_]*.
func labelName(s []byte) (name, rest []byte, ok bool) {
	i := 0
	for i < len(s) && (s[i] == '_' || 'a' <= s[i] && s[i] <= 'z' || 'A' <= s[i] && s[i] <= 'Z' || i > 0 && '0' <= s[i] && s[i] <= '9') {
		i++
	}
	return s[:i], s[i:], i > 0
}

// quoted reads a double-quoted string with the text format's escapes (\\,
// \", \n) and returns its contents still escaped; they must be UTF-8.
func quoted(s []byte) (contents, rest []byte, ok bool) {
	if len(s) == 0 || s[0] != '"' {
		return nil, s, false
	}
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i+1 == len(s) || (s[i+1] != '\\' && s[i+1] != '"' && s[i+1] != 'n') {
				return nil, s, false
			}
			i++
		case '"':
			return s[1:i], s[i+1:], utf8.Valid(s[1:i])
		}
	}
	return nil, s, false
}

// unescape undoes quoted's escapes; it copies only when there are some.
func unescape(s []byte) []byte {
	if bytes.IndexByte(s, '\\') < 0 {
		return s
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			i++
			if s[i] == 'n' {
				out = append(out, '\n')
				continue
			}
		}
		out = append(out, s[i])
	}
	return out
}

// parseProto reads varint-delimited MetricFamily messages. Each declared
// length is checked before anything is allocated, and a message is
// buffered only when it is at most MaxLineBytes, so a short answer
// declaring gigabytes costs nothing.
func parseProto(ctx context.Context, body io.Reader, a *accumulator) error {
	br := bufio.NewReader(body)
	var buf []byte
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("parse metrics: %w", err)
		}
		size, err := binary.ReadUvarint(br)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				err = errors.New("truncated message length")
			}
			return fmt.Errorf("decode protobuf metrics: %w", err)
		}
		if size > MaxBytes {
			return fmt.Errorf("decode protobuf metrics: message declares %d bytes, at most %d accepted", size, MaxBytes)
		}
		if size > MaxLineBytes {
			// Too large to hold: skip it unread, unless it is a queue
			// family (its name comes first, as every encoder writes it).
			if fam := peekFamily(br, int(size)); fam >= 0 {
				return fmt.Errorf("decode protobuf metrics: %s message of %d bytes, at most %d accepted", families[fam], size, MaxLineBytes)
			}
			if n, err := io.CopyN(io.Discard, br, int64(size)); err != nil {
				if errors.Is(err, errOverCap) {
					return err
				}
				if errors.Is(err, io.EOF) {
					return fmt.Errorf("decode protobuf metrics: truncated message: %d of %d declared bytes", n, size)
				}
				return fmt.Errorf("decode protobuf metrics: %w", err)
			}
			continue
		}
		if cap(buf) < int(size) {
			buf = make([]byte, size)
		}
		msg := buf[:size]
		if n, err := io.ReadFull(br, msg); err != nil {
			if errors.Is(err, errOverCap) {
				return err
			}
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("decode protobuf metrics: truncated message: %d of %d declared bytes", n, size)
			}
			return fmt.Errorf("decode protobuf metrics: %w", err)
		}
		if err := a.protoFamily(msg); err != nil {
			return err
		}
	}
}

// MetricFamily, Metric and LabelPair field numbers (io.prometheus.client).
const (
	famName, famType, famMetric = 1, 3, 4
	metricLabel                 = 1
	lpName, lpValue             = 1, 2
	valueField                  = 1 // of Gauge, Counter and Untyped
)

// valueFields: which Metric field holds the value of a family type.
var valueFields = map[uint64]protowire.Number{0 /* COUNTER */ : 3, 1 /* GAUGE */ : 2, 3 /* UNTYPED */ : 5}

// peekFamily looks at the first field of the next message without
// consuming it: the queue family it names, or -1.
func peekFamily(br *bufio.Reader, size int) int {
	head, _ := br.Peek(min(size, 256))
	num, typ, n := protowire.ConsumeTag(head)
	if n < 0 || num != famName || typ != protowire.BytesType {
		return -1
	}
	name, m := protowire.ConsumeBytes(head[n:])
	if m < 0 {
		return -1
	}
	return familyIndex(name)
}

func familyIndex(name []byte) int {
	for i, f := range families {
		if bytes.Equal(name, f) {
			return i
		}
	}
	return -1
}

// protoFamily adds the samples of one MetricFamily message. A message that
// is not well-formed protobuf is an error; a bad sample in a well-formed
// one is skipped.
func (a *accumulator) protoFamily(msg []byte) error {
	var name []byte
	var typ uint64
	for b := msg; len(b) > 0; {
		num, wt, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("decode protobuf metrics: %w", protowire.ParseError(n))
		}
		b = b[n:]
		switch {
		case num == famName && wt == protowire.BytesType:
			name, n = protowire.ConsumeBytes(b)
		case num == famType && wt == protowire.VarintType:
			typ, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, wt, b)
		}
		if n < 0 {
			return fmt.Errorf("decode protobuf metrics: %w", protowire.ParseError(n))
		}
		b = b[n:]
	}
	fam := familyIndex(name)
	if fam < 0 {
		return nil
	}
	for b := msg; len(b) > 0; {
		num, wt, n := protowire.ConsumeTag(b)
		b = b[n:]
		if num != famMetric || wt != protowire.BytesType {
			b = b[protowire.ConsumeFieldValue(num, wt, b):]
			continue
		}
		m, n := protowire.ConsumeBytes(b)
		b = b[n:]
		model, v, reason := parseProtoMetric(m, typ)
		if err := a.add(fam, model, v, reason); err != nil {
			return err
		}
	}
	return nil
}

// parseProtoMetric reads one Metric message of a family of type typ: its
// model and value, or the reason to skip it.
func parseProtoMetric(m []byte, typ uint64) (model []byte, v float64, reason string) {
	want, ok := valueFields[typ]
	if !ok {
		return nil, 0, SkipMalformed
	}
	var labels labelSet
	hasValue := false
	for len(m) > 0 {
		num, wt, k := protowire.ConsumeTag(m)
		if k < 0 {
			return nil, 0, SkipMalformed
		}
		m = m[k:]
		if wt != protowire.BytesType || (num != metricLabel && num != want) {
			if k = protowire.ConsumeFieldValue(num, wt, m); k < 0 {
				return nil, 0, SkipMalformed
			}
			m = m[k:]
			continue
		}
		sub, k := protowire.ConsumeBytes(m)
		if k < 0 {
			return nil, 0, SkipMalformed
		}
		m = m[k:]
		if num == want {
			if v, ok = protoValue(sub); !ok {
				return nil, 0, SkipMalformed
			}
			hasValue = true
			continue
		}
		label, val, ok := protoLabel(sub)
		if !ok {
			return nil, 0, SkipMalformed
		}
		if why := labels.add(label); why != "" {
			return nil, 0, why
		}
		labels.value(label, val)
	}
	if !hasValue {
		return nil, 0, SkipMalformed
	}
	return labels.model(), v, ""
}

// protoLabel reads a LabelPair; name and value must be UTF-8.
func protoLabel(b []byte) (name, value []byte, ok bool) {
	for len(b) > 0 {
		num, wt, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, nil, false
		}
		b = b[n:]
		var f []byte
		if wt == protowire.BytesType && (num == lpName || num == lpValue) {
			f, n = protowire.ConsumeBytes(b)
			if num == lpName {
				name = f
			} else {
				value = f
			}
		} else {
			n = protowire.ConsumeFieldValue(num, wt, b)
		}
		if n < 0 {
			return nil, nil, false
		}
		b = b[n:]
	}
	return name, value, len(name) > 0 && utf8.Valid(name) && utf8.Valid(value)
}

// protoValue reads the double value of a Gauge, Counter or Untyped (0 when
// absent, as proto2 defines).
func protoValue(b []byte) (float64, bool) {
	var v float64
	for len(b) > 0 {
		num, wt, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, false
		}
		b = b[n:]
		if num == valueField && wt == protowire.Fixed64Type {
			var bits uint64
			bits, n = protowire.ConsumeFixed64(b)
			v = math.Float64frombits(bits)
		} else {
			n = protowire.ConsumeFieldValue(num, wt, b)
		}
		if n < 0 {
			return 0, false
		}
		b = b[n:]
	}
	return v, true
}
