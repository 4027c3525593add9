// Package eppqueue parses an EPP's /metrics answer into its flow-control
// queue per model. It depends on prometheus/common only, so its fuzz target
// builds without client-go.
package eppqueue

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// EPP flow-control queue gauges, newest name first; the older one is still
// exported by llm-d EPPs and is what Gateway API Inference Extension EPPs
// export.
const (
	Metric       = "llm_d_epp_flow_control_queue_size"
	LegacyMetric = "inference_extension_flow_control_queue_size"
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

// MaxBytes bounds what Parse reads, and so any one protobuf
// message in it; an EPP's /metrics is tens of kilobytes. A larger answer is
// an error for that EPP.
const MaxBytes = 16 << 20

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
		return n, fmt.Errorf("parse metrics: answer over %d bytes", MaxBytes)
	}
	return n, err
}

// maxQueueSample: a larger queue sample is a broken exporter, dropped like a
// NaN one; it also keeps the per-model sums finite.
const maxQueueSample = 1e9

// Parse reads a /metrics response and sums the flow-control queue per
// model across fairness IDs and priorities. It uses
// llm_d_epp_flow_control_queue_size, or
// inference_extension_flow_control_queue_size when the former has no
// samples. NaN, infinite, negative and over-1e9 samples are ignored. An answer over
// 16 MiB, or a protobuf message declaring more bytes than that or than the
// answer holds, is an error.
func Parse(body io.Reader, contentType string) (Queue, error) {
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
		filtered, err := filterFamilies(body, Metric, LegacyMetric)
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
	samples := byName[Metric]
	if len(samples) == 0 {
		samples = byName[LegacyMetric]
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
// declared length is checked against MaxBytes before anything is
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
	if size > MaxBytes {
		return nil, fmt.Errorf("decode protobuf metrics: message declares %d bytes, at most %d accepted", size, MaxBytes)
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
